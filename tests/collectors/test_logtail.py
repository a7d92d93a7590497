"""Log lines of a real file are counted once each, across a rotation and a truncation."""

from __future__ import annotations

import os

from django.db.models import Sum

from collectors.logtail import DEFAULT_PATTERNS, LogTailer
from collectors.models import Event, MetricSample
from collectors.sampling import HostCollector


def _append(path, *lines: str) -> None:
    with open(path, "a") as handle:
        handle.writelines(f"{line}\n" for line in lines)


def _totals(host) -> dict[str, float]:
    rows = MetricSample.objects.filter(host=host, metric="log.matches").values("label").annotate(total=Sum("value"))
    return {row["label"]: row["total"] for row in rows}


def test_lines_counted_once_across_rotation_and_truncation(make_host, tmp_path):
    log = tmp_path / "xrootd.log"
    _append(log, "old history: checksum mismatch", "old history: timeout")  # before the collector
    host = make_host(log_files=[{"path": str(log)}])
    collector = HostCollector(host)
    collector.tick()
    assert _totals(host) == dict.fromkeys(DEFAULT_PATTERNS, 0.0)  # history is not news

    _append(log, "250122 10:00:01 ofs_write: adler32 checksum mismatch on /data/f1", "all good", "read timed out")
    collector.tick()
    _append(log, 'GET /data/f2 HTTP/1.1" 503 0', "an unfinished line: out of memory")
    # The unfinished line has no newline yet; the writer completes it after rotating.
    with open(log, "a") as handle:
        handle.write("... still unfinished")
    collector.tick()

    # Rotation by rename; the old writer still appends to the renamed file, then reopens.
    rotated = tmp_path / "xrootd.log.1"
    os.rename(log, rotated)
    with open(rotated, "a") as handle:
        handle.write(" then finished\nTPC pull failed: connection refused\n")
    _append(log, "new file: Connection timeout", "new file: std::bad_alloc")
    collector.tick()

    # Truncation in place (copytruncate): shorter than our offset.
    log.write_text("")
    _append(log, "timeout")
    collector.tick()
    collector.tick()  # nothing new: nothing counted twice

    assert _totals(host) == {
        "checksum_error": 1.0,
        "timeout": 3.0,
        "http_5xx": 1.0,
        "out_of_memory": 2.0,
        "tpc_failure": 1.0,
    }
    assert not Event.objects.filter(host=host, kind="log_burst").exists()


def test_a_burst_logs_its_first_lines(make_host, tmp_path, settings):
    settings.STORAGEOPS_LOG_BURST_THRESHOLD = 5
    log = tmp_path / "door.log"
    host = make_host(log_files=[{"path": str(log), "patterns": {"denied": r"permission denied"}}])
    collector = HostCollector(host)
    collector.tick()  # the file does not exist yet; it is read from 0 when it appears
    _append(log, *[f"open /data/f{i}: permission denied" for i in range(7)])
    collector.tick()
    [burst] = Event.objects.filter(host=host, kind="log_burst")
    assert burst.summary.startswith("7 × denied")
    assert "open /data/f0: permission denied" in burst.detail
    assert _totals(host) == {"denied": 7.0}


def test_default_patterns_match_what_they_say():
    import re

    expectations = {
        "checksum_error": ["Checksum mismatch for /data/x", "checksum error: adler32 differs"],
        "timeout": ["Operation timed out", "TIMEOUT waiting for checksum", "connection timeout"],
        "http_5xx": ['"PUT /x HTTP/1.1" 500 12', "HTTP/1.1 502 Bad Gateway", "status=503"],
        "out_of_memory": ["Out of memory: Killed process 123 (xrootd)", "std::bad_alloc"],
        "tpc_failure": ["TPC copy failed: no such file", "third-party copy error"],
    }
    for name, lines in expectations.items():
        for line in lines:
            assert re.search(DEFAULT_PATTERNS[name], line), (name, line)
    assert not re.search(DEFAULT_PATTERNS["http_5xx"], '"GET /x HTTP/1.1" 200 5000')
    assert not re.search(DEFAULT_PATTERNS["timeout"], "set timeouts to 60")
    LogTailer([]).close()
