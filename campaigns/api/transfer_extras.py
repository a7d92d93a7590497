"""The engines' columns of a transfer (campaigns.models.transfer_extras) as read-only fields of
the transfer API, documented in its schema with the type each column declares."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from campaigns.models.transfer_extras import ExtraColumn, columns


class ExtraColumnField(serializers.Field):
    """One engine column, read from the transfer (its relation fetched with select_related)."""

    def __init__(self, column: ExtraColumn, **kwargs) -> None:
        self.column = column
        super().__init__(source="*", read_only=True, help_text=column.help_text or None, **kwargs)

    def to_representation(self, transfer):
        return self.column.value_of(transfer)


class ExtraColumnFieldSchema(OpenApiSerializerFieldExtension):
    # Registered with drf-spectacular by being defined (a subclass of its extension).
    target_class = ExtraColumnField

    def map_serializer_field(self, auto_schema, direction) -> dict:
        column: ExtraColumn = self.target.column
        schema: dict = {"type": "integer", "format": "int64"} if column.kind is int else {"type": "string"}
        if column.empty is None:
            schema["nullable"] = True
        return schema


class WithTransferExtras:
    """A Transfer serializer mixin: the registered engines' columns, placed before `before` (where
    FTS's ids were when they were Transfer's own columns)."""

    extras_before = "transfer_host"

    def get_fields(self):
        fields = super().get_fields()
        extras = {column.name: ExtraColumnField(column) for column in columns()}
        if self.extras_before not in fields:
            return {**fields, **extras}
        placed = {}
        for name, field in fields.items():
            if name == self.extras_before:
                placed.update(extras)
            placed[name] = field
        return placed
