"""Fixtures of the collector tests: hosts, and real processes stopped by pid."""

from __future__ import annotations

import uuid

import pytest

from collectors.models import Host


@pytest.fixture
def make_host(db):
    def make(**fields) -> Host:
        fields.setdefault("name", f"h-{uuid.uuid4().hex[:8]}")
        fields.setdefault("sample_interval", 1)
        return Host.objects.create(**fields)

    return make
