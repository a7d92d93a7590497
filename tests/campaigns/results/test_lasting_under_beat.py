"""A lasting slowdown under a real Celery beat, short (issue 34): the scenario of
benchmarks/lasting_regression_beat.py with a 30-s interval instead of every minute, six quiet
runs, three slowed, one back; beat's task held while door2 restarts (about 11 s when the slow
throttle is undone). Fewer quiet runs or files make bands too wide to hold a door at 4 MB/s
(three quiet runs: 0-52 MB/s; six of eight files, which the throttle let burst to 15-26 MB/s:
0-44 MB/s), so the runs are the full script's twelve files of 8 MiB (about 6 s quiet, 25 s slowed). Every part
is a real process: two XRootD doors, beat on the database scheduler, a worker, door2's collector
(which logs the throttle's restart and config change itself), an SMTP and an HTTP server."""

from __future__ import annotations

import os

import pytest

from benchmarks.lasting_regression_beat import report, run_scenario, throughput
from tests.support.sparse import has_tmpfs

# Six minutes of one test process: a soak, run on demand (STORAGEOPS_SOAK=1 make test) like the
# full script (benchmarks/lasting_regression_beat.py); the suite keeps the same verdicts through
# beat's own message in tests/browser/test_lasting_regression.py.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("STORAGEOPS_SOAK") != "1", reason="a soak: STORAGEOPS_SOAK=1 runs it"),
]
QUIET = 6
SLOWED = 3  # the new normal needs three runs from its first to make a baseline


def test_beat_fires_a_slowdown_that_stays_regressed_then_recovers_and_a_new_normal_makes_it_improved(log_dir):
    if not has_tmpfs():
        pytest.skip("needs a tmpfs at /dev/shm for the sparse files")
    outcome = run_scenario(log_dir, quiet=QUIET, slowed=SLOWED, back=1, every_seconds=30)
    text = report(outcome)
    print(text)
    quiet, slowed, back = outcome.phase("quiet"), outcome.phase("slowed"), outcome.phase("undone")
    everything = [run for _, run in outcome.runs]
    assert all(r.trigger == "schedule" and r.state == "succeeded" for r in everything), text
    assert len(quiet) >= QUIET and len(slowed) == SLOWED and len(back) == 1, text
    assert not outcome.phase("during change"), text
    assert [r.summary["judgement"]["status"] for r in quiet] == ["no_baseline"] * 3 + ["within"] * (len(quiet) - 3)

    logged = sorted(e.pk for e in outcome.slowed_by)
    for i, run in enumerate(slowed):
        j = run.summary["judgement"]
        assert j["status"] == "regressed" and throughput(j)["status"] == "regressed", text
        # The quiet runs only: no slowed run joins the band. (Where its lower edge falls is the
        # full script's to show: six runs on this shared machine are few, and one such band's
        # edge fell at 7.2 MB/s, under half their median of 15.9.)
        assert j["baseline_runs"] == [r.pk for r in reversed(quiet)][:10], text
        assert sorted(s["event"] for s in j["suspects"]) == logged, text
        assert j.get("ongoing") == (None if i == 0 else {"since": slowed[0].pk, "runs": i + 1}), text
    assert back[0].summary["judgement"]["status"] == "recovered", text
    assert back[0].summary["judgement"]["recovered"] == {"since": slowed[0].pk, "runs": SLOWED}, text

    assert outcome.deliveries == [
        (slowed[0].pk, "regression", "sent"),
        *((r.pk, "regression", "suppressed") for r in slowed[1:]),
        (back[0].pk, "recovered", "sent"),
    ], text
    start, recovered = outcome.mails
    assert (
        f"] {slowed[0]} regressed" in start
        and "throughput: " in start
        and f" of {len(quiet)} runs): regressed" in start
    )
    for event in outcome.slowed_by:
        assert f"{event.kind} on {event.host.name}: {event.summary}" in start, start
    assert f"https://storageops.site.example/campaigns/runs/{slowed[0].pk}/" in start
    assert f"Recovered: the regression since run #{slowed[0].pk} lasted {SLOWED} runs." in recovered
    assert [h["props"]["kind"] for h in outcome.hooks] == ["regression", "recovered"]

    again = outcome.again
    assert again["normal_from"] == slowed[0].pk and again["baseline_runs"] == [r.pk for r in reversed(slowed)]
    assert again["status"] == "improved" and again["headline"].startswith("Throughput improved"), again
    assert again["earlier"][0]["status"] == "recovered"
