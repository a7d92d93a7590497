"""Campaign.engine_options in the API: one field whose OpenAPI schema is the registered engines'
options (the chosen engine's options form checks them, through the model's clean), and the
answer to a client still sending the option fields of earlier releases."""

from __future__ import annotations

from django import forms
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from campaigns.models import engine_registry


def engine_options_schema() -> dict:
    """engine_options in OpenAPI: the union of the registered engines' options, each said with
    its engine (the schema of the chosen engine is what the API checks)."""
    properties: dict[str, dict] = {}
    for entry in engine_registry.registered():
        for name, field in entry.options_form.base_fields.items() if entry.options_form else ():
            prop = {"type": "boolean" if isinstance(field, forms.BooleanField) else "integer"}
            prop["description"] = f"{entry.label}: {field.help_text or field.label}"
            for bound, key in (
                (getattr(field, "min_value", None), "minimum"),
                (getattr(field, "max_value", None), "maximum"),
            ):
                if bound is not None:
                    prop[key] = bound
            properties[name] = prop
    return {"type": "object", "properties": properties, "additionalProperties": False}


@extend_schema_field(engine_options_schema())
class EngineOptionsField(serializers.JSONField):
    """The engine's own options (Campaign.engine_options), checked by the engine's schema."""


# Engine options were fields of their own until they moved into engine_options. A client still
# sending them gets a 400 that names the new place, rather than an alias: two spellings of one
# option would both have to be documented, merged and kept. Each engine names its own
# (EngineEntry.retired_fields).
def refuse_retired_option_fields(data) -> None:
    retired = {old: new for entry in engine_registry.registered() for old, new in entry.retired_fields}
    sent = sorted(set(retired) & set(data)) if hasattr(data, "keys") else []
    if sent:
        moved = 'Moved into engine_options: send "engine_options": {{"{}": ...}}.'
        raise serializers.ValidationError({name: [moved.format(retired[name])] for name in sent})
