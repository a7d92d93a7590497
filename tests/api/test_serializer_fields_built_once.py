"""Serializer fields derived once per class: each instance still gets fields of its own, bound
to it, and what the API answers is what it answered when they were derived every time."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from campaigns.api.serializers import BackendSerializer
from campaigns.models import Backend
from storageops.api import base


class _Counting(base.FieldsBuiltOnce, serializers.ModelSerializer):
    class Meta:
        model = Backend
        fields = ["id", "name", "access_layer"]


def test_fields_are_derived_once_and_each_instance_gets_its_own(monkeypatch):
    calls = []
    original = serializers.ModelSerializer.get_fields

    def counting(self):
        calls.append(type(self))
        return original(self)

    monkeypatch.setattr(serializers.ModelSerializer, "get_fields", counting)
    base.FieldsBuiltOnce._built_fields.pop(_Counting, None)
    first, second = _Counting(), _Counting()
    assert set(first.fields) == set(second.fields) == {"id", "name", "access_layer"}
    assert calls == [_Counting]  # derived for the first instance only
    # Fields of their own, bound to their own serializer: requests served at once by two
    # threads never share one.
    assert first.fields["name"] is not second.fields["name"]
    assert first.fields["name"].parent is first and second.fields["name"].parent is second


@pytest.mark.django_db
def test_answers_are_those_derived_every_time(monkeypatch):
    backend = Backend.objects.create(name="zfs-pool", access_layer="xrootd")
    built = BackendSerializer(backend).data
    monkeypatch.setattr(base.FieldsBuiltOnce, "get_fields", lambda self: serializers.ModelSerializer.get_fields(self))
    assert BackendSerializer(backend).data == built
    # A write still validates with the fields it always had.
    refused = BackendSerializer(data={"name": "", "access_layer": "nope"})
    assert not refused.is_valid()
    assert {"name", "access_layer"} <= set(refused.errors)
