"""The FTS engine's pure parts: reason taxonomy, job bodies, campaign validation, dispatch."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db.models import ProtectedError

from campaigns import runs
from campaigns.runs.engines.copies import CopyJob
from campaigns.runs.engines.fts.client import JobOptions, active_starts, file_outcome, job_body, storage_element
from campaigns.runs.engines.fts.errors import categorize_fts, parse_fts_reason
from campaigns.runs.engines.fts.models import FtsInstance
from campaigns.runs.engines.fts.options import FtsOptions
from campaigns.spec import RunSpec
from tests.support.factories import campaign, endpoint


@pytest.mark.parametrize(
    ("reason", "category", "code"),
    [
        ("SOURCE [2] Failed to stat file (No such file or directory)", "not_found", 2),
        ("SOURCE [5] Source and user-defined adler32 checksum do not match (8bcc446b != 00000001)",
         "checksum_mismatch", 5),
        ("DESTINATION [17] Destination file exists and overwrite is not enabled", "file_exists", 17),
        ("TRANSFER [110] Checksum timeout of 1800 seconds has been exceeded", "checksum_timeout", 110),
        ("TRANSFER [70] Transfer forcefully killed: Probably stalled", "transfer_timeout", 70),
        ("Job has been canceled because it stayed in the queue for too long", "transfer_timeout", None),
        ("TRANSFER [5] HTTP 500 : Unexpected server error: 500 Internal Server Error", "http_5xx", 5),
        ("DESTINATION [13] HTTP 403 : Permission refused", "permission_denied", 13),
        ("TRANSFER [7] curl error (7): Couldn't connect to server", "connection_refused", 7),
        ("TRANSFER [110] curl error (28): Timeout was reached", "transfer_timeout", 110),
        ("DESTINATION [28] No space left on device", "no_space", 28),
        ("Job canceled by the user", "cancelled", None),
        ("TRANSFER [95] Destination does not support delegation.", "tpc_failure", 95),
        ("Something FTS never said before", "other", None),
    ],
)  # fmt: skip
def test_fts_reasons_map_onto_the_taxonomy(reason, category, code):
    assert categorize_fts(reason) == (category, code)


def test_reason_scope_is_parsed():
    assert parse_fts_reason("DESTINATION [17] exists") == ("DESTINATION", 17)
    assert parse_fts_reason("Probably stalled") == ("", None)


def test_job_body_carries_every_parameter_explicitly():
    files = [CopyJob(id=11, index=0, source="root://a:1094//s/0", destination="root://b:1094//d/0", size=5, step=1,
                     attempt=1, checksum="0a1b2c3d"),
             CopyJob(id=12, index=1, source="root://a:1094//s/1", destination="root://b:1094//d/1", size=5, step=1,
                     attempt=1)]  # fmt: skip
    options = JobOptions.from_spec(RunSpec.from_snapshot({"parameters": {
        "checksum_mode": "target", "checksum_algorithm": "adler32", "overwrite": False, "retries": 2,
        "timeout": 600, "streams": 4, "tcp_buffer_size": 4194304,
    }}), FtsOptions(priority=5, strict_copy=True))  # fmt: skip
    body = job_body(files, options, {"campaign": 3, "run": 9, "step": 1})
    assert body["params"] == {
        "verify_checksum": "target", "overwrite": False, "retry": 2, "retry_delay": 0, "priority": 5,
        "timeout": 600, "nostreams": 4, "buffer_size": 4194304, "strict_copy": True,
        "job_metadata": {"campaign": 3, "run": 9, "step": 1},
    }  # fmt: skip
    first, second = body["files"]
    assert first["checksum"] == "adler32:0a1b2c3d" and "checksum" not in second
    assert first["metadata"] == {"campaign": 3, "run": 9, "step": 1, "transfer": 11, "index": 0}
    assert (first["sources"], first["destinations"], first["filesize"]) == (["root://a:1094//s/0"],
                                                                            ["root://b:1094//d/0"], 5)  # fmt: skip


def test_file_outcome_reads_fts_fields():
    outcome = file_outcome(
        {"file_id": 4, "file_state": "FINISHED", "reason": "", "filesize": 1000, "tx_duration": 2.0,
         "start_time": "2026-11-23T02:14:05", "finish_time": "2026-11-23T02:14:07", "transfer_host": "fts1",
         "checksum": "adler32:00000001", "file_metadata": '{"transfer": 77}'}
    )  # fmt: skip
    assert outcome.transfer_id == 77 and outcome.ok and outcome.throughput_bps == 500.0
    assert outcome.start_time.isoformat() == "2026-11-23T02:14:05+00:00"
    assert storage_element("root://door1.example.org:1094//data/x") == "root://door1.example.org"
    # A file FTS never started (cancelled in the queue): no duration, not 0.
    never = file_outcome({"file_id": 5, "file_state": "CANCELED", "reason": "Job canceled by the user",
                          "filesize": None, "tx_duration": None, "start_time": None,
                          "finish_time": "2026-11-23T02:14:07"})  # fmt: skip
    assert never.tx_duration is None and never.throughput_bps is None and never.filesize == 0
    assert file_outcome({"file_state": "CANCELED", "tx_duration": 0, "start_time": None}).tx_duration is None


@pytest.mark.django_db
def test_an_fts_campaign_needs_an_instance_and_a_valid_one():
    src, dst = endpoint("u-src", "root://a:1094//s/"), endpoint("u-dst", "root://b:1094//d/")
    with pytest.raises(ValidationError) as info:
        campaign("no-fts", [src], [dst], engine="fts")
    assert info.value.message_dict["engine_options"] == [
        "instance: Choose the FTS instance that runs this campaign's transfers."
    ]
    with pytest.raises(ValidationError) as info:
        campaign("gone-fts", [src], [dst], engine="fts", engine_options={"instance": 999_999, "priority": 9})
    assert info.value.message_dict["engine_options"] == [
        "instance: There is no FTS instance with this id. priority: Ensure this value is less than or equal to 5."
    ]
    with pytest.raises(ValidationError) as info:
        campaign("gfal2-options", [src], [dst], engine="gfal2", engine_options={"instance": 1})
    assert info.value.message_dict["engine_options"] == ["The gfal2 engine takes no options (got instance)."]
    with pytest.raises(ValidationError) as info:
        FtsInstance.objects.create(name="bad", url="ftp://fts.example.org", x509_cert="relative/cert")
    assert set(info.value.message_dict) == {"url", "x509_cert"}
    with pytest.raises(ValidationError):
        FtsInstance.objects.create(name="both", url="https://fts", x509_cert="/tmp/x509up", bearer_token="t")
    ok = FtsInstance.objects.create(name="ok", url="https://fts3.example.org:8446", bearer_token="t")
    obj = campaign("with-fts", [src], [dst], engine="fts", engine_options={"instance": ok.pk})
    # The schema fills in the defaults, and the instance in use cannot be deleted.
    assert obj.engine_options == {"instance": ok.pk, "priority": 3, "strict_copy": False, "measure_files": 0}
    with pytest.raises(ProtectedError, match="in use by campaigns \\(with-fts\\)"):
        ok.delete()
    with pytest.raises(ProtectedError):
        FtsInstance.objects.filter(pk=ok.pk).delete()
    run = runs.create_run(obj)
    assert run.snapshot["fts"]["url"] == "https://fts3.example.org:8446"
    assert run.snapshot["fts"]["auth"] == "token" and "t" not in run.snapshot["fts"].values()
    assert run.snapshot["parameters"]["engine_options"]["instance"] == ok.pk


def test_a_run_frozen_before_engine_options_keeps_its_fts_options():
    # Snapshots taken before migration 0016 hold the old keys; a retry of such a run reuses it.
    old = {"fts_instance_id": 7, "fts_priority": 5, "fts_strict_copy": True, "engine": "fts"}
    assert FtsOptions.from_parameters(old) == FtsOptions(7, 5, True)
    new = {"engine_options": {"instance": 8, "priority": 2, "strict_copy": False}, "engine": "fts"}
    assert FtsOptions.from_parameters(new) == FtsOptions(8, 2, False)
    assert RunSpec.from_snapshot({"parameters": old}).engine_options == {}


def test_every_runs_driver_goes_to_the_transfers_queue_and_beats_tasks_to_control(settings):
    from campaigns.runs.engines.fts.tasks import drive_fts_run
    from campaigns.tasks import drive_run
    from storageops.schedules import builtin

    routes = settings.CELERY_TASK_ROUTES
    assert routes[drive_fts_run.name]["queue"] == routes[drive_run.name]["queue"] == settings.STORAGEOPS_TRANSFERS_QUEUE
    assert settings.CELERY_TASK_DEFAULT_QUEUE == settings.STORAGEOPS_CONTROL_QUEUE
    assert not [task for _, task, _ in builtin() if task in routes]


def test_files_fts_is_copying_are_known_with_ftss_own_start_time():
    files = [
        {"file_state": "ACTIVE", "start_time": "2026-11-23T02:14:05", "file_metadata": {"transfer": 7}},
        {"file_state": "SUBMITTED", "start_time": None, "file_metadata": '{"transfer": 8}'},
        {"file_state": "FINISHED", "start_time": "2026-11-23T02:14:01", "file_metadata": {"transfer": 9}},
        {"file_state": "ACTIVE", "start_time": "2026-11-23T02:14:06"},  # not one of ours: no transfer id
    ]
    started, other = active_starts(files)
    assert started == {7: 1795400045.0}
    assert other == {8, 9}


def test_the_doubles_url_copy_watchdog_cancels_a_copy_past_its_timeout_and_grace():
    """As url-copy's timeout task: a copy still running at timeout + grace has its gfal2 context
    cancelled (the copy then fails ETIMEDOUT); one that ended before is left alone."""
    import threading
    import time

    from tests.support.fts_double import FtsDouble

    class Context:
        def __init__(self) -> None:
            self.cancelled = threading.Event()

        def cancel(self) -> None:
            self.cancelled.set()

    double = FtsDouble(timeout_grace=0.2)
    hung, ended = Context(), Context()
    started = time.monotonic()
    late = double._watchdog(hung, 1)
    early = double._watchdog(ended, 1)
    early.cancel()  # the copy returned first
    assert hung.cancelled.wait(5) and late.expired.is_set()
    assert time.monotonic() - started >= 1.2
    time.sleep(0.3)
    assert not ended.cancelled.is_set() and not early.expired.is_set()
