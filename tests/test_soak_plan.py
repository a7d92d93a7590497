"""The soak's fault plan (benchmarks/soak.py) is a pure function of its seed and length, and
holds every kind of fault, two at once among them: a soak is repeatable from its seed."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from benchmarks.soak import DOORS, FULL_DOOR, KINDS, Soak, fault_plan


def test_the_same_seed_gives_the_same_plan_and_another_seed_another():
    assert fault_plan(48, 60) == fault_plan(48, 60)
    assert fault_plan(48, 60) != fault_plan(49, 60)
    assert fault_plan(48, 60) != fault_plan(48, 30)


def test_an_hours_plan_holds_every_kind_two_at_once_and_fits_the_hour():
    plan = fault_plan(48, 60)
    kinds = Counter(f.kind for f in plan)
    assert set(kinds) == set(KINDS) and len(plan) >= 120, kinds
    pairs = Counter(f.pair for f in plan if f.pair)
    assert pairs and set(pairs.values()) == {2}
    for pair in pairs:
        first, second = (f for f in plan if f.pair == pair)
        assert first.at == second.at and first.target != second.target
    assert all(f.at >= 90 and f.at + f.hold < 54 * 60 for f in plan)
    hangs = [f.hold for f in plan if f.kind == "door_hang"]
    assert min(hangs) >= 30 and max(hangs) <= 300
    assert {f.target for f in plan if f.kind == "door_full"} == {FULL_DOOR}
    assert {f.target for f in plan if f.kind in ("door_kill", "door_hang")} == set(DOORS)
    # A target is never in two faults at once (a door is not hung while it is dead).
    by_target: dict[str, list] = {}
    for fault in plan:
        by_target.setdefault(fault.target, []).append(fault)
    for faults in by_target.values():
        for before, after in itertools.pairwise(faults):
            assert before.at + before.hold <= after.at


def test_a_short_soak_scales_its_faults_down_and_still_holds_every_kind():
    plan = fault_plan(7, 20)
    assert {f.kind for f in plan} == set(KINDS) and any(f.pair for f in plan)
    assert max(f.hold for f in plan if f.kind == "door_hang") <= 100


def test_a_killed_worker_or_client_is_recorded_by_its_death_event_dated_when_last_alive():
    """A worker that held nothing leaves no resumed run: its own "worker lost" event, dated at
    its last beat before the kill, records the fault; another worker's death does not."""
    from datetime import UTC, datetime, timedelta

    from benchmarks.soak import Fault, _records

    began = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    ended = began + timedelta(seconds=20)

    def lost(node: str, seconds_before: float) -> dict:
        summary = f"Worker {node} (pid 4242) died without shutting down; last known alive at 11:59:52 UTC, …"
        return {"time": began - timedelta(seconds=seconds_before), "kind": "worker_lost", "summary": summary,
                "host__name": None, "run_id": None, "detail": ""}  # fmt: skip

    worker, client = Fault(0, "worker_kill", "worker", 0), Fault(0, "client_kill", "client-pool-a", 0)
    assert _records(worker, began, ended, [lost("soak@box", 8)])
    assert not _records(worker, began, ended, [lost("client-pool-a@box", 8)])
    assert not _records(worker, began, ended, [lost("soak@box", 60)]), "a death long before is another's"
    assert _records(client, began, ended, [lost("client-pool-a@box", 8)], pid=4242)
    assert not _records(client, began, ended, [lost("client-pool-b@box", 8)], pid=4242)
    assert not _records(client, began, ended, [lost("client-pool-a@box", 8)], pid=4343), "the next kill's death"


def test_a_fill_is_recorded_by_its_door_collectors_disk_full_event_not_by_copy_errors():
    from datetime import UTC, datetime, timedelta

    from benchmarks.soak import Fault, _records

    began = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
    ended = began + timedelta(seconds=60)

    def event(kind: str, host: str | None, summary: str, seconds_after: float) -> dict:
        return {"time": began + timedelta(seconds=seconds_after), "kind": kind, "summary": summary,
                "host__name": host, "run_id": None, "detail": ""}  # fmt: skip

    fill = Fault(0, "door_full", "door2", 60)
    full = event("disk_full", "door2", "No space left on door2:/var/soak/doors/door2/data for 61 s: …", 0.8)
    copies = event("run_incident", None, "No space left on root://127.0.0.1:40001: 8 copies failed …", 3)
    assert _records(fill, began, ended, [full, copies]) == [full["summary"]]
    assert not _records(fill, began, ended, [copies]), "the copies' episode is the copies' story"
    assert not _records(fill, began, ended, [{**full, "host__name": "door1"}])
    earlier = {
        **full,
        "time": began - timedelta(seconds=90),
        "detail": f"…\nended {(began - timedelta(seconds=20)).isoformat()}, after 70 s",
    }
    assert not _records(fill, began, ended, [earlier]), "an earlier fill's, over before this one"


def test_a_fill_begun_before_the_collector_saw_room_is_recorded_by_the_open_event():
    """Two fills 5 s apart on a collector that samples every 5 s: one disk_full event carries
    both, and the second fill is recorded by it, not counted as missing."""
    from datetime import UTC, datetime, timedelta

    from benchmarks.soak import Fault, _records

    first = datetime(2026, 11, 29, 3, 22, 22, tzinfo=UTC)
    began, ended = first + timedelta(seconds=73), first + timedelta(seconds=140)
    fill = Fault(0, "door_full", "door2", 67)
    event = {"time": first + timedelta(seconds=1), "kind": "disk_full", "host__name": "door2", "run_id": None,
             "summary": "No space left on door2:/d: 0 B free of 50.3 MB",
             "detail": "free space below 503 kB (the full mark) at …"}  # fmt: skip
    assert _records(fill, began, ended, [event]) == [event["summary"]]
    closed = f"{event['detail']}\nended {(first + timedelta(seconds=141)).isoformat()}, after 140.0 s"
    assert _records(fill, began, ended, [{**event, "detail": closed}])
    gone = f"{event['detail']}\nended {(first + timedelta(seconds=70)).isoformat()}, after 69.0 s"
    assert not _records(fill, began, ended, [{**event, "detail": gone}]), "room was seen between the fills"


def test_an_outage_is_recorded_by_the_event_whose_span_holds_the_kill_and_only_that():
    """Redis killed 5 s after the worker that watched it: its successor, ready after Redis came
    back, logs the outage from its predecessor's last probe. An outage over before the kill, or
    begun well after it (the next fault's), is another's."""
    import json
    from datetime import UTC, datetime, timedelta

    from benchmarks.soak import Fault, _records

    began = datetime(2026, 11, 29, 3, 50, 37, 500000, tzinfo=UTC)
    ended = began + timedelta(seconds=4.8)
    kill = Fault(0, "redis_kill", "redis", 4.8)

    def outage(start: float, end: float) -> dict:
        span = {"outage": "broker", "start": (began + timedelta(seconds=start)).isoformat(),
                "end": (began + timedelta(seconds=end)).isoformat()}  # fmt: skip
        summary = "Broker (Redis) unreachable for 9 s"
        return {"time": began + timedelta(seconds=start), "kind": "run_incident", "host__name": None,
                "run_id": None, "summary": summary, "detail": json.dumps(span)}  # fmt: skip

    assert _records(kill, began, ended, [outage(-5.1, 9.1)])
    assert _records(kill, began, ended, [outage(1.9, 6.0)])
    assert not _records(kill, began, ended, [outage(-120, -116)]), "over before the kill"
    assert not _records(kill, began, ended, [outage(38, 60)]), "the next fault's"
    assert not _records(Fault(0, "postgres_stop", "postgres", 4.8), began, ended, [outage(1.9, 6.0)])


def test_a_hang_carried_by_an_open_event_must_name_the_same_process():
    from datetime import UTC, datetime, timedelta

    from benchmarks.soak import Fault, _records

    began = datetime(2026, 11, 29, 4, 11, 44, tzinfo=UTC)
    ended = began + timedelta(seconds=168)
    hang = Fault(0, "door_hang", "door1", 168)
    ends = (began + timedelta(seconds=62)).isoformat()

    def hung(pid: int) -> dict:
        return {"time": began - timedelta(seconds=332), "kind": "service_hung", "host__name": "door1", "run_id": None,
                "summary": f"xrootd hung for 394 s: pid {pid} stopped by a signal, then gone",
                "detail": f"process state T (stopped) …\nended {ends} (gone), after 394.0 s"}  # fmt: skip

    assert _records(hang, began, ended, [hung(22152)], pid=22152), "the same daemon, never seen running between"
    assert not _records(hang, began, ended, [hung(20334)], pid=22152), "an earlier daemon's hang, gone since"


def test_a_fill_its_collector_could_not_see_counts_its_copies_episode_and_says_so():
    stopped = {"kind": "collector_stop", "target": f"collector-{FULL_DOOR}", "began": "2026-11-29T01:00:00",
               "ended": "2026-11-29T01:05:00", "note": "", "recorded_as": "alert: Collector door2 silent"}  # fmt: skip
    fill = {"kind": "door_full", "target": FULL_DOOR, "began": "2026-11-29T01:01:00", "ended": "2026-11-29T01:02:00",
            "note": "", "recorded_as": None, "records": []}  # fmt: skip
    met = {**fill, "began": "2026-11-29T01:03:00", "ended": "2026-11-29T01:04:00",
           "copies_episode": "No space left on root://127.0.0.1:1095"}  # fmt: skip
    seen = {**fill, "began": "2026-11-29T01:10:00", "ended": "2026-11-29T01:11:00"}
    coverage = Soak._coverage(None, [stopped, fill, met, seen])
    assert coverage["door_full"] == {
        "collector stopped through it: not seen": 1,
        "collector stopped through it: recorded by its copies' episode": 1,
        "not recorded": 1,
    }


@pytest.mark.django_db
def test_a_runs_files_are_checked_on_the_doors_disk_and_each_stray_file_says_what_its_copy_was(tmp_path):
    """Each succeeded copy is on the door with its size and adler32; a file on the door that no
    succeeded record holds is counted under its copy's record (a failed copy's partial file, or
    a file no copy wrote), then the run's folder is removed."""
    from benchmarks.soak import adler32_of
    from campaigns.models import Run, Transfer
    from devsite.xrootd_server import XRootDServer
    from tests.support.factories import mock_campaign

    door = XRootDServer("door2", tmp_path / "door2")  # never started: only its namespace is read
    run = Run.objects.create(campaign=mock_campaign("soaked"), state="partial")
    folder = door.local_path(f"/data/runs/run-{run.pk}")
    folder.mkdir(parents=True)
    (folder / "ok").write_bytes(b"x" * 1000)
    (folder / "partial").write_bytes(b"x" * 10)
    (folder / "nobodys").write_bytes(b"y")
    endpoint = run.campaign.sources.first()

    def record(index: int, name: str, state: str, **fields) -> None:
        Transfer.objects.create(
            run=run, index=index, source=f"mock://src.test/{index}",
            destination=door.root_url_for(f"/data/runs/run-{run.pk}/{name}"),
            source_endpoint=endpoint, destination_endpoint=endpoint, state=state, **fields,
        )  # fmt: skip

    record(0, "ok", "succeeded", size=1000, destination_checksum=f"adler32:{adler32_of(folder / 'ok')}")
    record(1, "partial", "failed", size=1000, error_category="transfer_timeout")
    record(2, "gone", "succeeded", size=1000)

    soak = Soak.__new__(Soak)
    soak.doors = {"door2": door}
    found = soak.check_run(run)

    assert found["ok"] == 1 and found["missing"] == 1 and found["unrecorded_files"] == 2, found
    assert found["unrecorded: failed transfer_timeout, run partial"] == 1, found
    assert found["unrecorded: no record, run partial"] == 1, found
    assert not folder.exists()
