"""The change log of StorageOps' own objects (NetBox's idea): who changed what, when,
through what, with the values before and after.

Signal receivers record every create, update and delete of the registered models, and
the changes of their many-to-many fields, so no view, admin page, API or command has to
remember to log. Secret fields are never copied: only whether they changed.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from storageops import context
from storageops.models import ChangeRecord
from storageops.sealed import SealedTextField

SECRET_FIELDS = {"bearer_token", "token", "password", "secret", "grafana_token"}
_HIDDEN = "(secret)"


def _value(obj: models.Model, field: models.Field) -> Any:
    if field.name in SECRET_FIELDS or isinstance(field, SealedTextField):
        return _HIDDEN if getattr(obj, field.attname) else ""
    value = field.value_from_object(obj)
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def snapshot(obj: models.Model) -> dict[str, Any]:
    data = {f.name: _value(obj, f) for f in obj._meta.concrete_fields if f.name not in ("created", "last_updated")}
    if obj.pk:
        for field in obj._meta.many_to_many:
            data[field.name] = sorted(getattr(obj, field.name).values_list("pk", flat=True))
    return data


def diff(before: dict | None, after: dict | None) -> dict[str, list]:
    """Field -> [before, after] for the fields that differ."""
    before, after = before or {}, after or {}
    return {k: [before.get(k), after.get(k)] for k in sorted({*before, *after}) if before.get(k) != after.get(k)}


def _shown(value: Any, limit: int = 60) -> str:
    if isinstance(value, list):
        text = ", ".join(str(v) for v in value) or "(none)"
    elif value is None:
        text = "(unset)"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_changes(changes: dict | None, limit: int = 300) -> str:
    """'roles: operator, viewer → viewer; is_staff: True → False': an update's changes in a line
    (roles first: what an admin reading a user's record looks for; the rest in name order)."""
    fields = sorted(changes or {}, key=lambda name: (name != "roles", name))
    text = "; ".join(f"{field}: {_shown(changes[field][0])} → {_shown(changes[field][1])}" for field in fields)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _record(obj: models.Model, action: str, before: dict | None, after: dict | None) -> ChangeRecord | None:
    changes = diff(before, after)
    if action == "update" and not changes:
        return None
    ctx = context.current()
    user = ctx.user.resolve() if hasattr(ctx.user, "resolve") else ctx.user
    return ChangeRecord.objects.create(
        user=user,
        user_name=user.get_username() if user else "",
        via=ctx.via,
        request_id=ctx.request_id,
        action=action,
        object_type=f"{obj._meta.app_label}.{obj._meta.model_name}",
        object_id=obj.pk,
        object_repr=str(obj)[:200],
        before=before,
        after=after,
        changes=changes,
    )


def _pre_save(sender, instance, raw=False, **kwargs) -> None:
    if raw:
        return
    old = sender.objects.filter(pk=instance.pk).first() if instance.pk else None
    instance._changelog_before = snapshot(old) if old else None


def _post_save(sender, instance, created, raw=False, **kwargs) -> None:
    if raw:
        return
    before = getattr(instance, "_changelog_before", None)
    _record(instance, "create" if created else "update", None if created else before, snapshot(instance))


def _post_delete(sender, instance, **kwargs) -> None:
    before = snapshot(instance)
    _record(instance, "delete", before, None)


def _m2m_changed(sender, instance, action, reverse, model, pk_set, **kwargs) -> None:
    if reverse or action not in ("pre_add", "pre_remove", "pre_clear", "post_add", "post_remove", "post_clear"):
        return
    if action.startswith("pre_"):
        instance._changelog_m2m_before = snapshot(instance)
        return
    before = getattr(instance, "_changelog_m2m_before", None)
    _record(instance, "update", before, snapshot(instance))


def register(*model_classes: type[models.Model]) -> None:
    for model in model_classes:
        uid = f"changelog-{model._meta.label}"
        pre_save.connect(_pre_save, sender=model, dispatch_uid=f"{uid}-pre")
        post_save.connect(_post_save, sender=model, dispatch_uid=f"{uid}-post")
        post_delete.connect(_post_delete, sender=model, dispatch_uid=f"{uid}-delete")
        for field in model._meta.many_to_many:
            m2m_changed.connect(_m2m_changed, sender=field.remote_field.through, dispatch_uid=f"{uid}-{field.name}")


def record_update(obj: models.Model, before: dict, after: dict, *, via: str, actor: str) -> ChangeRecord | None:
    """Log a change no signal receiver sees, made by something that is not a signed-in user:
    a user's roles set from the identity provider's groups (actor: the provider's name)."""
    changes = diff(before, after)
    if not changes:
        return None
    return ChangeRecord.objects.create(
        user=None,
        user_name=actor[:150],
        via=via,
        request_id=context.current().request_id,
        action="update",
        object_type=f"{obj._meta.app_label}.{obj._meta.model_name}",
        object_id=obj.pk,
        object_repr=str(obj)[:200],
        before=before,
        after=after,
        changes=changes,
    )
