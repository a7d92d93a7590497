"""fio and dd really run in the allowed directory; malicious parameters never reach a process."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from collectors import hosttests
from collectors.models import Event, MetricSample


@pytest.fixture
def test_dir(settings, tmp_path):
    settings.STORAGEOPS_HOST_TEST_DIR = str(tmp_path / "hosttests")
    return tmp_path / "hosttests"


def test_fio_write_and_read_store_bandwidth_iops_latency(make_host, test_dir):
    host = make_host()
    params = {"tool": "fio", "name": "fio-w", "size": 4 << 20, "block_size": 65536, "rw": "write"}
    result = hosttests.run_host_test(host, params)
    assert result["results"]["write_bps"] > 0 and result["results"]["write_iops"] > 0
    read = hosttests.run_host_test(host, {**params, "name": "fio-r", "rw": "randread", "block_size": 4096})
    assert set(read["results"]) == {"read_bps", "read_iops", "read_lat_ms"}

    stored = dict(MetricSample.objects.filter(host=host, label="fio-w").values_list("metric", "value"))
    assert set(stored) == {"hosttest.write_bps", "hosttest.write_iops", "hosttest.write_lat_ms"}
    assert all(v > 0 for v in stored.values())
    note = Event.objects.get(host=host, kind="note", summary__contains="fio-w")
    assert "MB/s" in note.summary and json.loads(note.detail)["params"]["rw"] == "write"
    assert list(test_dir.iterdir()) == []  # fio --unlink=1 leaves nothing behind


def test_dd_write_and_read(make_host, test_dir):
    host = make_host()
    write = hosttests.run_host_test(host, {"tool": "dd", "name": "dd-w", "size": 8 << 20, "rw": "write"})
    assert write["results"]["write_bps"] > 0 and write["results"]["write_iops"] > 0
    read = hosttests.run_host_test(
        host, {"tool": "dd", "name": "dd-r", "size": 8 << 20, "block_size": 1 << 20, "rw": "read"}
    )
    assert read["results"]["read_bps"] > 0
    assert MetricSample.objects.filter(host=host, metric="hosttest.read_bps", label="dd-r").count() == 1
    assert list(test_dir.iterdir()) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x; rm -rf /"},
        {"name": "--name=x; rm -rf /"},
        {"name": "../../etc/passwd"},
        {"subdir": "../"},
        {"subdir": "../outside"},
        {"subdir": "/etc"},
        {"subdir": "a/../../b"},
        {"size": "1G; reboot"},
        {"size": True},
        {"size": 10**15},
        {"block_size": 4097, "direct": True},
        {"block_size": "10M; reboot"},
        {"block_size": 0},
        {"iodepth": 0},
        {"iodepth": "4 --exec_prerun=/bin/sh"},
        {"numjobs": 1000},
        {"rw": "trim"},
        {"ioengine": "external:/tmp/evil.so"},
        {"tool": "sh"},
        {"tool": "dd", "rw": "randread"},
        {"direct": "yes"},
        {"exec_prerun": "/bin/sh"},
    ],
)
def test_malicious_parameters_are_refused_before_anything_runs(make_host, test_dir, bad):
    host = make_host()
    with pytest.raises(ValidationError):
        hosttests.run_host_test(host, {"tool": "fio", "name": "ok", "size": 1 << 20, **bad})
    assert not test_dir.exists()  # not even the directory was created
    assert not Event.objects.filter(host=host).exists()


def test_a_symlink_out_of_the_directory_is_refused(test_dir, tmp_path):
    test_dir.mkdir()
    (test_dir / "escape").symlink_to(tmp_path)
    with pytest.raises(ValidationError, match="inside"):
        hosttests.validate_params({"subdir": "escape"})
    assert hosttests.validate_params({"subdir": "inside-ok"}).directory == (test_dir / "inside-ok").resolve()
