"""A finished run judged against its campaign's comparable history (the judgement's rules; the
end-to-end experiment on real doors is tests/browser/test_regression_watch.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from campaigns import runs
from campaigns.results import baseline_choice, baselines
from campaigns.runs.lifecycle import RunDriver
from collectors.events import log_event
from collectors.models import Event
from tests.support.factories import campaign, endpoint, mock_campaign

pytestmark = pytest.mark.django_db
MB = 1_000_000


def finished(campaign, at, throughput: float, *, p95: float = 2.0, failed: int = 0, timeouts: int = 0, **fields):
    """A succeeded run of `campaign` that ended at `at` with these figures in its summary."""
    run = runs.create_run(campaign, trigger="schedule")
    ok = 100 - failed
    total = {"throughput_bps": throughput, "duration_p95": p95, "files_ok": ok, "files_failed": failed,
             "errors": {"checksum_timeout": timeouts} if timeouts else {}}  # fmt: skip
    steps = [{"step": 0, "concurrency": 4, "throughput_bps": throughput}]
    run.state, run.started_at, run.finished_at = "succeeded", at - timedelta(minutes=5), at
    run.summary = {"total": total, "steps": steps}
    for name, value in fields.items():
        setattr(run, name, value)
    run.save()
    return run


@pytest.fixture
def history():
    campaign = mock_campaign("weekly", file_count=100, concurrency_steps=[4])
    now = timezone.now()
    # Six quiet runs an hour apart, within 2 % of each other.
    past = [
        finished(campaign, now - timedelta(hours=7 - i), (100 + d) * MB) for i, d in enumerate([0, 2, -1, 1, -2, 0])
    ]
    return campaign, now, past


def test_the_runs_of_a_quiet_history_are_each_within_their_band(history):
    past = history[2]
    assert baselines.judge(past[0])["status"] == "no_baseline"
    assert baselines.judge(past[2])["headline"] == "No baseline yet: 2 comparable run(s), 3 needed."
    for run in past[3:]:
        judged = baselines.judge(run)
        assert judged["status"] == "within", judged
        assert judged["baseline_runs"] == [r.pk for r in reversed(past[: past.index(run)])]
        assert {f["key"] for f in judged["figures"]} >= {
            "throughput",
            "duration_p95",
            "error_rate",
            "step_throughput_4",
        }


def test_a_slower_run_is_regressed_on_throughput_with_the_change_named_as_suspect(history):
    campaign, now, _ = history
    endpoint = campaign.destinations.first()
    log_event("config_change", "xrootd.chksum max 2 on the destination", source="operator", endpoint=endpoint,
              time=now - timedelta(minutes=30))  # fmt: skip
    log_event("config_change", "an older change, before the last good run", endpoint=endpoint,
              time=now - timedelta(hours=3, minutes=30))  # fmt: skip
    slow = finished(campaign, now, 77 * MB, p95=2.6)
    judged = baselines.judge(slow)
    assert judged["status"] == "regressed"
    throughput = next(f for f in judged["figures"] if f["key"] == "throughput")
    assert throughput["status"] == "regressed" and throughput["change"] == pytest.approx(-0.23, abs=0.01)
    assert throughput["n"] == 6 and throughput["sigmas"] > 3
    assert next(f for f in judged["figures"] if f["key"] == "duration_p95")["status"] == "regressed"
    # Only what changed since the last run seen within its band.
    assert [s["summary"] for s in judged["suspects"]] == ["xrootd.chksum max 2 on the destination"]
    assert judged["headline"].startswith("Throughput regressed 23 % against the median of 6 comparable runs; since")
    assert "config change on " + endpoint.name in judged["headline"]


def test_improved_and_failure_rates_go_by_their_direction(history):
    campaign, now, _ = history
    faster = baselines.judge(finished(campaign, now, 130 * MB))
    assert faster["status"] == "improved" and not faster["suspects"]
    assert faster["headline"].startswith("Throughput improved 30 %")
    # 5 % of copies failing on checksum timeouts, against none before: regressed on both rates.
    failing = baselines.judge(finished(campaign, now + timedelta(hours=1), 100 * MB, failed=5, timeouts=5))
    keys = {f["key"]: f["status"] for f in failing["figures"]}
    assert keys["error_rate"] == keys["checksum_timeout_rate"] == "regressed" and keys["throughput"] == "within"


def test_only_comparable_runs_make_a_baseline(history):
    campaign, now, past = history
    # A disturbed run and a failed one are left out of the next run's baseline.
    past[-1].disturbed = True
    past[-1].save()
    past[-2].state = "partial"
    past[-2].save()
    judged = baselines.judge(finished(campaign, now, 100 * MB))
    assert judged["baseline_runs"] == [r.pk for r in reversed(past[:4])]
    # Another concurrency is another experiment: no baseline for it yet.
    campaign.concurrency_steps = [8]
    campaign.save()
    assert baselines.judge(finished(campaign, now + timedelta(hours=1), 50 * MB))["status"] == "no_baseline"


def test_the_band_has_a_floor_when_the_history_agrees_to_the_byte():
    assert baselines.band([100.0, 100.0, 100.0]) == {
        "median": 100.0, "sigma": 0.0, "low": 95.0, "high": 105.0, "capped": False, "threshold": 0.5,
        "spread_half": 5.0, "method": baselines.band_method(0.5),
    }  # fmt: skip
    assert baselines.band([0.0, 0.0, 0.0], is_rate=True)["high"] == 0.01
    wide = baselines.band([90.0, 100.0, 110.0, 100.0, 95.0])
    # Five runs: Student's t for 4 degrees of freedom, widened for one more run (99 %).
    assert wide["median"] == 100.0 and wide["high"] - 100.0 == pytest.approx(4.604 * (1.2**0.5) * 1.4826 * 5.0)
    # Tied runs do not collapse the spread (stressed run 15's nights: the MAD was 0).
    tied = baselines.band([47.0, 41.0, 35.0, 41.0, 41.0])
    assert tied["sigma"] == pytest.approx(1.2533 * 2.4) and tied["low"] < 35.0 and tied["high"] > 47.0
    # The fewer the runs, the wider the band for the same spread.
    assert baselines.band_sigmas(3) > 2 * baselines.band_sigmas(10) > 6


@pytest.mark.django_db(transaction=True)
def test_every_finished_run_is_judged_when_it_ends_and_its_page_shows_it(client, viewer):
    campaign = mock_campaign("judged", file_count=6, concurrency_steps=[2])
    driven = []
    for _ in range(4):
        run = runs.create_run(campaign, trigger="schedule")
        RunDriver(run.pk).drive()
        run.refresh_from_db()
        driven.append(run)
    assert [r.summary["judgement"]["status"] for r in driven[:3]] == ["no_baseline"] * 3
    last = driven[-1].summary["judgement"]
    # Mock copies' speed is this machine's: which side of the band is not the point here.
    assert last["status"] in ("within", "improved", "regressed")
    assert last["baseline_runs"] == [r.pk for r in reversed(driven[:3])]
    client.force_login(viewer)
    page = client.get(driven[-1].get_absolute_url()).content.decode()
    assert f'data-judgement="{last["status"]}"' in page
    assert page.count("data-figure=") == len(last["figures"]) >= 4


def test_a_regressed_run_page_names_the_figure_and_the_suspect(history, client, viewer):
    campaign, now, _ = history
    log_event("service_restart", "xrootd restarted with a new build", endpoint=campaign.sources.first(),
              time=now - timedelta(minutes=20))  # fmt: skip
    slow = finished(campaign, now, 60 * MB)
    slow.summary = {**slow.summary, "judgement": baselines.judge(slow)}
    slow.save()
    client.force_login(viewer)
    page = client.get(slow.get_absolute_url()).content.decode()
    assert 'data-judgement="regressed"' in page
    assert 'data-figure="throughput" data-status="regressed"' in page
    assert "Throughput regressed 40 %" in page and "xrootd restarted with a new build" in page


def test_the_status_grid_shows_each_backends_latest_judgement_and_links_to_the_run(history, client, viewer):
    campaign, now, past = history
    other = mock_campaign("nightly", file_count=10, concurrency_steps=[2])
    failed = runs.create_run(other, trigger="schedule")
    failed.state, failed.finished_at = "failed", now
    failed.save()
    slow = finished(campaign, now, 60 * MB)
    slow.summary = {**slow.summary, "judgement": baselines.judge(slow)}
    slow.save()
    client.force_login(viewer)
    page = client.get("/campaigns/status/").content.decode()
    backend = campaign.destinations.first().backend.name
    assert f'data-cell="{backend}|weekly" data-class="bad"' in page  # the regressed run, not the six before
    assert f'href="/campaigns/runs/{slow.pk}/"' in page and f"#{slow.pk} regressed" in page
    assert f'href="/campaigns/runs/{past[-1].pk}/"' not in page
    nightly_backend = other.destinations.first().backend.name
    assert f'data-cell="{nightly_backend}|nightly" data-class="bad"' in page and f"#{failed.pk} failed" in page


def test_a_p95_of_too_few_copies_is_not_judged(history):
    campaign, now, _ = history
    few = finished(campaign, now, 100 * MB, p95=9.9)  # twice the copy time of every run before
    few.summary["total"]["files_ok"] = baselines.P95_MIN_COPIES - 1
    judged = baselines.judge(few)
    assert judged["status"] == "within" and "duration_p95" not in {f["key"] for f in judged["figures"]}
    enough = finished(campaign, now, 100 * MB, p95=9.9)
    assert next(f for f in baselines.judge(enough)["figures"] if f["key"] == "duration_p95")["status"] == "regressed"


def test_a_run_over_two_backends_records_each_from_its_own_copies():
    """Through the real gfal2 mock plugin: each backend's figures are its own copies', and they
    add up to the run's."""
    src = endpoint("two-src", "mock://src.test/data/")
    eos = endpoint("two-eos", "mock://eos.test/data/?time=0", backend_name="eos")
    dcache = endpoint("two-dcache", "mock://dcache.test/data/?transfer_errno=110", backend_name="dcache")
    run = runs.create_run(campaign("two-backends", [src], [eos, dcache], file_count=8), trigger="api")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    by_backend = run.summary["backends"]
    assert set(by_backend) == {"eos", "dcache"}
    assert (by_backend["eos"]["files_ok"], by_backend["eos"]["files_failed"]) == (4, 0)
    assert (by_backend["dcache"]["files_ok"], by_backend["dcache"]["files_failed"]) == (0, 4)
    assert by_backend["eos"]["bytes"] == run.summary["total"]["bytes"]


def test_each_backend_of_a_run_is_judged_on_its_own_copies(client, viewer):
    """Six nights writing to EOS and dCache at once, then EOS slows by 40 % and dCache does not:
    EOS is regressed, dCache within, and the status grid colours each cell by its own backend."""
    eos = endpoint("both-eos", "mock://eos.test/data/", backend_name="eos")
    dcache = endpoint("both-dcache", "mock://dcache.test/data/", backend_name="dcache")
    both = campaign("both", [endpoint("both-src", "mock://src.test/data/")], [eos, dcache])
    now = timezone.now()

    def night(at, eos_mb: float, dcache_mb: float):
        run = finished(both, at, (eos_mb + dcache_mb) * MB)
        run.summary["backends"] = {
            "eos": {"copy_rate_bps": eos_mb * MB, "files_ok": 50, "files_failed": 0},
            "dcache": {"copy_rate_bps": dcache_mb * MB, "files_ok": 50, "files_failed": 0},
        }
        run.save()
        return run

    for i, d in enumerate([0, 2, -1, 1, -2, 0]):
        night(now - timedelta(hours=7 - i), 100 + d, 200 - d)
    slow = night(now, 60, 200)
    judged = baselines.judge(slow)
    assert judged["backends"] == {"dcache": "within", "eos": "regressed"}, judged["figures"]
    eos_figure = next(f for f in judged["figures"] if f["key"] == "backend_copy_rate:eos")
    assert eos_figure["backend"] == "eos" and round(eos_figure["change"], 2) == -0.4
    # The run's own throughput fell 13 %: it leads the headline, whose band is the run's.
    assert judged["status"] == "regressed" and judged["headline"].startswith("Throughput regressed 13 %")
    slow.summary = {**slow.summary, "judgement": judged}
    slow.save()
    client.force_login(viewer)
    page = client.get("/campaigns/status/").content.decode()
    assert 'data-cell="eos|both" data-class="bad"' in page
    assert 'data-cell="dcache|both" data-class="ok"' in page
    # A run over one backend has no figures of its own per backend: its one backend is the run.
    single = baselines.figures_of({"total": {"throughput_bps": 1.0}, "backends": {"eos": {"copy_rate_bps": 1.0}}})
    assert set(single) == {"throughput"}


def judged(run):
    """Judge the run and store the judgement, as finalize does when a run ends."""
    run.summary = {**run.summary, "judgement": baselines.judge(run)}
    run.save()
    return run.summary["judgement"]


def test_the_band_never_goes_below_zero_for_a_figure_that_cannot():
    # Four quiet nights and two slowed ones in a history (issue 34): their spread alone made a band
    # of -0.03 to 23.3 MB/s; the threshold (issue 49) holds it to half the median either way.
    wide = baselines.band([11.5, 11.8, 11.2, 11.6, 2.3, 2.2])
    assert wide["capped"] and wide["low"] == pytest.approx(11.35 / 2) and wide["high"] == pytest.approx(11.35 * 1.5)
    rates = baselines.band([0.0, 0.1, 0.0, 0.3, 0.0], is_rate=True)
    assert rates["low"] == 0.0 and not rates["capped"] and "never below 0" in rates["method"]


def test_a_lasting_slowdown_stays_regressed_ongoing_with_its_suspect_then_recovers(history):
    """Issue 34: the slowed runs must not join the baselines, each stays regressed (the later ones
    ongoing since the first, with its suspect), and the first run back is recovered."""
    campaign, now, past = history
    change = log_event("config_change", "throttle 4 MB/s on the door", endpoint=campaign.destinations.first(),
                       time=now - timedelta(minutes=30))  # fmt: skip
    slow = [finished(campaign, now + timedelta(hours=i), 20 * MB) for i in range(5)]
    verdicts = [judged(run) for run in slow]
    assert [v["status"] for v in verdicts] == ["regressed"] * 5
    assert all(v["baseline_runs"] == [r.pk for r in reversed(past)] for v in verdicts)  # the quiet nights only
    assert "ongoing" not in verdicts[0]
    assert [v["ongoing"] for v in verdicts[1:]] == [{"since": slow[0].pk, "runs": n} for n in (2, 3, 4, 5)]
    assert all([s["event"] for s in v["suspects"]] == [change.pk] for v in verdicts)
    assert f"(ongoing since run #{slow[0].pk}, 5 runs)" in verdicts[-1]["headline"]
    band = next(f for f in verdicts[-1]["figures"] if f["key"] == "throughput")
    assert band["low"] > 90 * MB and band["n"] == 6
    back = [finished(campaign, now + timedelta(hours=6 + i), 100 * MB) for i in range(3)]
    after = [judged(run) for run in back]
    assert after[0]["status"] == "recovered" and after[0]["recovered"] == {"since": slow[0].pk, "runs": 5}
    assert after[0]["headline"].startswith(f"Recovered: the regression since run #{slow[0].pk} lasted 5 runs.")
    assert [a["status"] for a in after[1:]] == ["within", "within"]
    assert next(f for f in after[-1]["figures"] if f["key"] == "throughput")["low"] > 50 * MB


def test_an_operator_may_include_a_regressed_run(history, operator):
    campaign, now, _ = history
    slow = finished(campaign, now, 60 * MB)
    judged(slow)
    assert slow.pk not in baselines.judge(finished(campaign, now + timedelta(hours=1), 100 * MB))["baseline_runs"]
    assert baseline_choice.standing(slow)["counted"] is False
    baseline_choice.choose(slow, "include", "the door was rebuilt slower on purpose", user=operator)
    assert slow.pk in baselines.judge(finished(campaign, now + timedelta(hours=2), 100 * MB))["baseline_runs"]


def test_accepting_a_new_normal_starts_a_new_baseline(history, operator):
    """After "accept as the new normal" from the first slowed run, the slowed level is the
    baseline and a return to the old speed is improved, not regressed."""
    campaign, now, _ = history
    slow = [finished(campaign, now + timedelta(hours=i), 20 * MB + i * 100_000) for i in range(3)]
    for run in slow:
        judged(run)
    with pytest.raises(ValidationError):
        baseline_choice.accept_new_normal(slow[0], "", user=operator)
    baseline_choice.choose(slow[0], "accepted", "door2 moved to the slower pool for good", user=operator)
    note = Event.objects.filter(kind="note", run_id=slow[0].pk).latest("time")
    assert note.user == operator and "accepted as the new normal" in note.summary and "slower pool" in note.summary
    assert baseline_choice.standing(slow[0])["counted"] is True
    nxt = finished(campaign, now + timedelta(hours=4), 20.1 * MB)
    verdict = judged(nxt)
    # The three slowed runs (each told "regressed" against the old level) are the baseline now.
    assert verdict["baseline_runs"] == [r.pk for r in reversed(slow)] and verdict["normal_from"] == slow[0].pk
    assert verdict["status"] == "within", verdict["headline"]
    fast = judged(finished(campaign, now + timedelta(hours=5), 100 * MB))
    assert fast["status"] == "improved" and fast["headline"].startswith("Throughput improved")
    # An operator who sets the run back to the rule undoes it: the old level is the baseline again.
    baseline_choice.choose(slow[0], "auto", "", user=operator)
    assert baselines.judge(finished(campaign, now + timedelta(hours=6), 20 * MB))["status"] == "regressed"


def test_the_campaign_page_and_the_grid_say_since_when_a_regression_lasts(history, client, viewer):
    campaign, now, _ = history
    slow = [finished(campaign, now + timedelta(hours=i), 20 * MB) for i in range(3)]
    for run in slow:
        judged(run)
    client.force_login(viewer)
    page = client.get(campaign.get_absolute_url()).content.decode()
    assert f'data-regressed-since="{slow[0].pk}"' in page and f"#{slow[0].pk}</a> (3 runs)" in page
    grid = client.get("/campaigns/status/").content.decode()
    assert f'data-ongoing-since="{slow[0].pk}"' in grid and f"since #{slow[0].pk}" in grid
    run_page = client.get(slow[-1].get_absolute_url()).content.decode()
    assert f"regressed (ongoing since #{slow[0].pk})" in run_page and 'id="band-method" data-n="6"' in run_page
    judged(finished(campaign, now + timedelta(hours=4), 100 * MB))
    page = client.get(campaign.get_absolute_url()).content.decode()
    assert 'data-watch="recovered"' in page and "data-regressed-since" not in page
