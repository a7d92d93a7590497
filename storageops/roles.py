"""The three roles of StorageOps as Django groups, and what each may do.

viewer reads everything; operator also starts and cancels runs and host tests and logs events;
admin may do everything (configuration included). Kept in one place so that the
migration, the API permissions and the tests agree.
"""

from __future__ import annotations

from pathlib import Path

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)

# Apps outside this project whose permissions the roles hold too (the schedules' models).
OTHER_APPS = ("django_celery_beat",)
OPERATOR_EXTRA = (
    "campaigns.start_run",
    "campaigns.cancel_run",
    "campaigns.choose_baseline",
    "campaigns.add_readinesscheck",
    "collectors.add_event",
    "collectors.add_hosttestseries",
    "collectors.change_hosttestseries",
)


def role_apps() -> tuple[str, ...]:
    """The labels whose permissions the roles hold: every installed app of this project (an
    engine's app too, which no list here names) and OTHER_APPS."""
    from django.apps import apps
    from django.conf import settings

    libraries = {"site-packages", "dist-packages"}  # a virtual environment may sit inside BASE_DIR
    ours = [
        c.label
        for c in apps.get_app_configs()
        if Path(c.path).is_relative_to(settings.BASE_DIR) and not libraries & set(Path(c.path).parts)
    ]
    return (*ours, *OTHER_APPS)


def sync_groups(apps) -> None:
    """Create or update the groups; safe to call again after new models or permissions."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ours = Permission.objects.filter(content_type__app_label__in=role_apps())
    view = ours.filter(codename__startswith="view_")
    operator_extra = [
        ours.get(content_type__app_label=label.split(".")[0], codename=label.split(".")[1]) for label in OPERATOR_EXTRA
    ]
    Group.objects.get_or_create(name=VIEWER)[0].permissions.set(view)
    Group.objects.get_or_create(name=OPERATOR)[0].permissions.set([*view, *operator_extra])
    Group.objects.get_or_create(name=ADMIN)[0].permissions.set(ours)
