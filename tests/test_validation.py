"""Every field a user fills in is validated with a clear message, whatever path saves it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from campaigns.models import Backend, Campaign, Endpoint
from collectors.models import Host

pytestmark = pytest.mark.django_db


@pytest.fixture
def backend():
    return Backend.objects.create(name="dcache-zfs", access_layer="dcache")


def _errors(exc: pytest.ExceptionInfo) -> dict:
    return exc.value.message_dict


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://door1:2811/data/", "Unsupported URL scheme 'ftp'"),
        ("javascript:alert(1)", "Unsupported URL scheme 'javascript'"),
        ("door1:1094/data", "Unsupported URL scheme"),
        ("root:///data/", "needs a host"),
        ("root://door1:99999//data/", "port is not a number"),
        ("file://door1/data/", "absolute path"),
        ("root://door1//da ta/", "spaces"),
    ],
)
def test_endpoint_url_is_checked_by_scheme(backend, url, fragment):
    with pytest.raises(ValidationError) as exc:
        Endpoint.objects.create(name="e1", backend=backend, url=url)
    assert any(fragment in m for m in _errors(exc)["url"])


@pytest.mark.parametrize(
    "url", ["root://127.0.0.1:1094//data/", "davs://door2:2880/pnfs/test/", "file:///lustre/test/", "mock://m/x?time=1"]
)
def test_endpoint_accepts_storage_urls(backend, url, settings):
    settings.STORAGEOPS_FILE_ROOTS = ["/lustre"]
    assert Endpoint.objects.create(name="e1", backend=backend, url=url).protocol == url.split(":")[0]


@pytest.mark.parametrize("roots", [[], ["/lustre/test2"], ["/lus"]])
def test_a_file_endpoint_lies_below_a_root_the_deployment_names(backend, settings, roots):
    settings.STORAGEOPS_FILE_ROOTS = roots
    with pytest.raises(ValidationError) as exc:
        Endpoint.objects.create(name="e1", backend=backend, url="file:///lustre/test/")
    assert any("STORAGEOPS_FILE_ROOTS" in m or "below no folder" in m for m in _errors(exc)["url"])


def test_endpoint_credentials_paths_must_be_absolute(backend):
    with pytest.raises(ValidationError) as exc:
        Endpoint.objects.create(name="e1", backend=backend, url="davs://d:2880/x/", ca_dir="certs")
    assert "ca_dir" in _errors(exc)


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"file_size": -1}, "file_size", ""),
        ({"file_size": 0}, "file_size", "greater than or equal to 1"),
        ({"file_count": 0}, "file_count", "greater than or equal to 1"),
        ({"concurrency_steps": [0]}, "concurrency_steps", "whole number from 1"),
        ({"concurrency_steps": []}, "concurrency_steps", "cannot be blank"),
        ({"concurrency_steps": [1, "2"]}, "concurrency_steps", "whole number from 1"),
        ({"concurrency_steps": [1, 999999]}, "concurrency_steps", "whole number from 1 to 2000"),
        ({"checksum_algorithm": "sha512"}, "checksum_algorithm", "not a valid choice"),
        ({"checksum_mode": "sometimes"}, "checksum_mode", "not a valid choice"),
        ({"tpc_mode": "teleport"}, "tpc_mode", "not a valid choice"),
        ({"streams": 0}, "streams", "greater than or equal to 1"),
        ({"timeout": 0}, "timeout", "greater than or equal to 1"),
        ({"max_bytes": 0}, "max_bytes", "greater than or equal to 1"),
        ({"source_path": "/etc"}, "source_path", "relative"),
        ({"destination_path": "a/../../b"}, "destination_path", "'..'"),
        ({"file_mix": [{"count": 10, "size": -5}]}, "file_mix", "size must be a whole number"),
        ({"file_mix": [{"count": 10}]}, "file_mix", 'exactly "count" and "size"'),
        ({"concurrency_steps": [1, 2, 4]}, "step_seconds", "needs a step length"),
        ({"name": "../etc"}, "name", "letters, digits"),
    ],
)
def test_campaign_knobs_are_validated(fields, field, fragment):
    campaign = Campaign(name=fields.pop("name", "sweep"), **fields)
    with pytest.raises(ValidationError) as exc:
        campaign.save()
    errors = _errors(exc)
    assert field in errors, errors
    assert any(fragment in m for m in errors[field]), errors[field]


def test_valid_sweep_and_mix():
    campaign = Campaign(
        name="bnl-like",
        concurrency_steps=[1, 2, 4],
        step_seconds=300,
        file_mix=[{"count": 9000, "size": 9 * 10**9}, {"count": 6000, "size": 4 * 10**9}],
    )
    campaign.save()
    assert campaign.planned_files == 15000
    assert campaign.planned_bytes == 9000 * 9 * 10**9 + 6000 * 4 * 10**9


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "Door 1"}, "name"),
        ({"node_exporter_url": "ftp://door1:9100/metrics"}, "node_exporter_url"),
        ({"sample_interval": 0}, "sample_interval"),
        ({"watched_files": ["etc/xrootd.cfg"]}, "watched_files"),
        ({"watched_filesystems": ["data/xrootd"]}, "watched_filesystems"),
        ({"watched_filesystems": "/data/xrootd"}, "watched_filesystems"),
        ({"watched_services": [{"name": "xrootd"}]}, "watched_services"),
        ({"watched_services": [{"name": "x", "process": "xrootd", "command": "rm -rf /"}]}, "watched_services"),
        ({"log_files": [{"path": "/var/log/x.log", "patterns": {"bad": "([unclosed"}}]}, "log_files"),
    ],
)
def test_host_fields_are_validated(fields, field):
    with pytest.raises(ValidationError) as exc:
        Host.objects.create(**{"name": "door1", **fields})
    assert field in _errors(exc)


def test_one_sided_checksum_needs_generated_sources():
    with pytest.raises(ValidationError) as exc:
        Campaign(name="one-sided", checksum_mode="source").save()
    assert "create the source files" in exc.value.message_dict["checksum_mode"][0]
    Campaign(name="one-sided-ok", checksum_mode="target", create_sources=True).save()


@pytest.mark.django_db
def test_file_sizes_past_the_limit_or_the_counters_are_refused_with_a_clear_error(settings):
    from django.core.exceptions import ValidationError

    from tests.support.factories import mock_campaign

    obj = mock_campaign("sizes", file_size=1000)
    settings.STORAGEOPS_MAX_FILE_SIZE = 10**12
    obj.file_size = 10**18
    with pytest.raises(ValidationError, match="Files of up to 1,000,000,000,000 bytes"):
        obj.full_clean()
    obj.file_size, obj.file_mix = 1000, [{"count": 10, "size": 2 * 10**12}]
    with pytest.raises(ValidationError, match="STORAGEOPS_MAX_FILE_SIZE"):
        obj.full_clean()
    settings.STORAGEOPS_MAX_FILE_SIZE = 2**62
    obj.file_mix = [{"count": 4, "size": 2**62}]
    with pytest.raises(ValidationError, match="more bytes than can be counted"):
        obj.full_clean()
