"""Honest outcomes and "retry failed": a run with failed or untried transfers ends partial with
its counts; retry_failed re-drives exactly those transfers as a linked run, and a chain of
retries brings a campaign to 100 % (issue 15)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.core.exceptions import ValidationError

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer
from campaigns.results.readers import retry_chain
from campaigns.runs.lifecycle import RunDriver
from campaigns.runs.planning import plan
from collectors import grafana
from collectors.models import Event
from tests.support.factories import campaign, endpoint, half_failing_campaign

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_dispatch(django_capture_on_commit_callbacks):
    """retry_failed dispatches its run on commit; these tests drive it in-process."""
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        yield callbacks


def drive(run: Run) -> Run:
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    return run


def test_a_run_with_failed_copies_ends_partial_with_its_counts():
    run = drive(runs.create_run(half_failing_campaign("half", file_count=12), trigger="command"))
    assert run.state == RunState.PARTIAL
    assert (run.files_done, run.files_failed, run.files_skipped) == (6, 6, 0)
    assert run.stop_reason == "all planned transfers finished"
    failed = Transfer.objects.filter(run=run, state="failed")
    assert set(failed.values_list("error_category", flat=True)) == {"transfer_timeout"}
    end = Event.objects.get(run_id=run.pk, kind="run_end")
    assert f"Run {run} partial: 6 ok, 6 failed, 0 skipped" in end.summary
    annotation = grafana.annotation(end)
    assert "state:partial" in annotation["tags"] and "partial: 6 ok, 6 failed" in annotation["text"]


def test_retry_failed_re_drives_exactly_the_failed_transfers_as_a_linked_run():
    first = drive(runs.create_run(half_failing_campaign("chain", file_count=12, file_size=1000), trigger="command"))
    odd = [1, 3, 5, 7, 9, 11]
    assert runs.retryable_count(first) == 6

    retry = runs.retry_failed(first, trigger="command")
    assert retry.retry_of == first and list(first.retries.all()) == [retry]
    assert retry.state == RunState.PENDING and retry.trigger == "command"
    assert retry.snapshot["retry"] == {"of": first.pk, "indices": odd, "seed": first.pk}
    # The frozen parameters and endpoints are the first run's.
    assert {k: v for k, v in retry.snapshot.items() if k != "retry"} == first.snapshot
    assert (retry.planned_files, retry.planned_bytes) == (6, 6000)
    note = Event.objects.get(run_id=retry.pk, kind="note")
    assert note.summary.startswith(f"Retry of run #{first.pk}: 6 transfers")

    # Same index, source and size; the destination is below the retry's own run folder.
    planned = {t.index: t for t in plan(retry.snapshot, retry.pk)}
    assert sorted(planned) == odd
    for t in Transfer.objects.filter(run=first, index__in=odd):
        assert (planned[t.index].source, planned[t.index].size) == (t.source, t.size)
        assert f"/run-{retry.pk}/f{t.index:07d}" in planned[t.index].destination

    # The snapshot is frozen: the same destination times out again, and nothing succeeded.
    retry = drive(retry)
    assert sorted(Transfer.objects.filter(run=retry).values_list("index", flat=True)) == odd
    assert retry.state == RunState.FAILED and retry.files_failed == 6
    chain = retry_chain(retry)
    assert [r["id"] for r in chain["runs"]] == [first.pk, retry.pk]
    assert (chain["files_done"], chain["planned_files"], chain["percent"]) == (6, 12, 50.0)

    # A run is retried once; what its retry left is retried from the retry, keeping the seed.
    with pytest.raises(ValidationError, match=f"already retried by run #{retry.pk}"):
        runs.retry_failed(first, trigger="command")
    again = runs.retry_failed(retry, trigger="command")
    assert again.snapshot["retry"] == {"of": retry.pk, "indices": odd, "seed": first.pk}


def test_budget_leftovers_are_retried_under_the_budget_a_new_run_gets_now():
    src = endpoint("budget-src", "mock://src.test/data/")
    dst = endpoint("budget-dst", "mock://dst.test/data/?time=0")
    obj = campaign("budget-retry", [src], [dst], file_count=10, file_size=1000, concurrency_steps=[1],
                   max_bytes=4000, max_bytes_per_day=7000)  # fmt: skip
    first = drive(runs.create_run(obj, trigger="command"))
    assert first.state == RunState.PARTIAL and first.stop_reason.startswith("byte budget reached")
    assert first.files_skipped == 10 - first.files_done > 0 and first.files_failed == 0
    left = sorted(Transfer.objects.filter(run=first).exclude(state="succeeded").values_list("index", flat=True))
    retry = runs.retry_failed(first, trigger="command")
    assert retry.snapshot["retry"]["indices"] == left
    # What is left of the day's budget is tighter than the campaign's per-run one now.
    assert retry.snapshot["budget"] == {"max_bytes": 7000 - first.bytes_done, "label": "daily byte budget"}


def test_what_cannot_be_retried_is_refused_with_a_reason():
    obj = half_failing_campaign("refused", file_count=4)
    pending = runs.create_run(obj, trigger="command")
    with pytest.raises(ValidationError, match="is pending: only a finished run can be retried"):
        runs.retry_failed(pending, trigger="command")
    assert runs.retryable_count(pending) == 0

    src = endpoint("all-ok-src", "mock://src.test/data/")
    dst = endpoint("all-ok-dst", "mock://dst.test/data/?time=0")
    done = drive(runs.create_run(campaign("all-ok", [src], [dst], file_count=4), trigger="command"))
    assert done.state == RunState.SUCCEEDED
    with pytest.raises(ValidationError, match="nothing to retry: all its 4 planned transfers succeeded"):
        runs.retry_failed(done, trigger="command")

    archived = drive(runs.create_run(obj, trigger="command"))
    Transfer.objects.filter(run=archived).delete()
    Run.objects.filter(pk=archived.pk).update(summary={**archived.summary, "archived": {"transfers_deleted": 4}})
    archived.refresh_from_db()
    with pytest.raises(ValidationError, match="deleted by retention"):
        runs.retry_failed(archived, trigger="command")
    assert Run.objects.filter(retry_of__isnull=False).count() == 0


def test_a_run_cancelled_before_its_start_is_retried_whole():
    run = runs.create_run(half_failing_campaign("never", file_count=5), trigger="command")
    assert runs.request_cancel(run)
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED and not Transfer.objects.filter(run=run).exists()
    retry = runs.retry_failed(run, trigger="command")
    assert retry.snapshot["retry"]["indices"] == [0, 1, 2, 3, 4]


def test_retry_of_a_file_mix_keeps_each_index_source_and_size():
    src = endpoint("mix-src", "mock://src.test/data/")
    good = endpoint("mix-good", "mock://good.test/data/?time=0")
    bad = endpoint("mix-bad", "mock://bad.test/data/?transfer_errno=5")
    obj = campaign("mix", [src], [good, bad], file_mix=[{"count": 6, "size": 1000}, {"count": 6, "size": 5000}])
    first = drive(runs.create_run(obj, trigger="command"))
    retry = runs.retry_failed(first, trigger="command")
    before = {t.index: (t.source, t.size) for t in Transfer.objects.filter(run=first, state="failed")}
    # The mix is shuffled with the first run's id as seed, whatever the retry's id is.
    assert {t.index: (t.source, t.size) for t in plan(retry.snapshot, retry.pk)} == before
    assert retry.planned_bytes == sum(size for _, size in before.values())


def test_missing_sources_written_later_are_retried_to_a_complete_chain(xrootd_pair):
    """The PHENIX case on real doors: sources missing in the first run fail it partially; once
    they exist, the retry copies exactly those, and the chain reaches 100 %."""
    door1, door2 = xrootd_pair
    src = endpoint("retry-src", door1.root_url_for("/data/retry/"))
    dst = endpoint("retry-dst", door2.root_url_for("/data/retry/"))
    obj = campaign("retry-real", [src], [dst], file_mix=[{"count": 4, "size": 100_000}, {"count": 4, "size": 300_000}],
                   checksum_mode="both", checksum_algorithm="adler32", concurrency_steps=[4])  # fmt: skip
    first = runs.create_run(obj, trigger="command")
    planned = list(plan(first.snapshot, first.pk))

    def write_source(t) -> None:
        door1.write_local("/" + urlsplit(t.source).path.lstrip("/"), bytes([t.index]) * t.size)

    for t in planned[::2]:
        write_source(t)  # the odd indices' sources are not there yet
    first = drive(first)
    assert first.state == RunState.PARTIAL, first.error
    assert (first.files_done, first.files_failed, first.files_skipped) == (4, 4, 0)
    failed = Transfer.objects.filter(run=first, state="failed").order_by("index")
    assert list(failed.values_list("index", flat=True)) == [1, 3, 5, 7]

    for t in planned[1::2]:
        write_source(t)
    retry = drive(runs.retry_failed(first, trigger="command"))
    assert retry.state == RunState.SUCCEEDED, list(Transfer.objects.filter(run=retry).values_list("error_message"))
    copied = Transfer.objects.filter(run=retry).order_by("index")
    assert [t.index for t in copied] == [1, 3, 5, 7]
    for t in copied:
        target = door2.local_path("/" + urlsplit(t.destination).path.lstrip("/"))
        assert f"/run-{retry.pk}/" in str(target)
        assert target.read_bytes() == bytes([t.index]) * t.size  # the source of that index, whole
    chain = retry_chain(first)
    assert (chain["files_done"], chain["planned_files"], chain["percent"], chain["complete"]) == (8, 8, 100.0, True)
    assert runs.retryable_count(retry) == 0


def test_a_retry_copies_the_sources_its_chain_created_and_uploads_none(monkeypatch):
    """Uploading again would give the sources new bytes (what earlier runs copied would no
    longer match them) and a door refuses to overwrite a file a lingering copy still reads."""
    import campaigns.runs.lifecycle as lifecycle

    uploads: list[int] = []
    monkeypatch.setattr(
        lifecycle, "create_sources", lambda snapshot, run_id, copier, control: uploads.append(run_id) or {}
    )
    first = drive(runs.create_run(half_failing_campaign("reuse", file_count=4, create_sources=True), trigger="command"))
    Transfer.objects.filter(run=first).update(source_checksum="0badcafe")  # as generated sources record it
    retry = drive(runs.retry_failed(first, trigger="command"))
    assert uploads == [first.pk]
    assert set(Transfer.objects.filter(run=retry).values_list("source_checksum", flat=True)) == {"0badcafe"}


def test_retry_failed_leaves_out_files_whole_on_their_destination_and_files_never_needed(client, operator):
    """A copy recorded cancelled yet found whole on its destination (as records made before such
    copies were recorded finished say), and a file a completed time-bounded sweep never needed
    (skipped "not needed", counted in the summary): neither is copied again, and the run page's
    button counts exactly what the retry copies."""
    from django.db.models import F
    from django.urls import reverse

    from campaigns.runs.outcome import NOT_NEEDED_REASON
    from campaigns.runs.retrying_failed import retry_indices

    run = drive(runs.create_run(half_failing_campaign("left-out", file_count=12, file_size=1000), trigger="command"))
    assert list(Transfer.objects.filter(run=run, state="failed").values_list("index", flat=True)) == [1, 3, 5, 7, 9, 11]
    Transfer.objects.filter(run=run, index=1).update(state="cancelled", complete_on_destination=True)
    Transfer.objects.filter(run=run, index=3).update(state="cancelled", complete_on_destination=False)
    Transfer.objects.filter(run=run, index=5).update(state="skipped", error_message=NOT_NEEDED_REASON)
    Run.objects.filter(pk=run.pk).update(
        files_failed=F("files_failed") - 3, files_cancelled=2, files_skipped=1, summary={**run.summary, "not_needed": 1}
    )
    run.refresh_from_db()
    assert retry_indices(run) == [3, 7, 9, 11]
    assert runs.retryable_count(run) == 4
    client.force_login(operator)
    html = client.get(reverse("campaigns:run_detail", args=[run.pk])).content.decode()
    assert "Retry failed (4)" in html
    retry = runs.retry_failed(run, trigger="command")
    assert retry.snapshot["retry"]["indices"] == [3, 7, 9, 11] and retry.planned_files == 4

    # Nothing left but files whole there or never needed: nothing to retry, and no button.
    other = drive(runs.create_run(half_failing_campaign("none-left", file_count=4, file_size=1000), trigger="command"))
    Transfer.objects.filter(run=other, index=1).update(state="cancelled", complete_on_destination=True)
    Transfer.objects.filter(run=other, index=3).update(state="skipped", error_message=NOT_NEEDED_REASON)
    Run.objects.filter(pk=other.pk).update(
        files_failed=0, files_cancelled=1, files_skipped=1, summary={**other.summary, "not_needed": 1}
    )
    other.refresh_from_db()
    assert retry_indices(other) == [] and runs.retryable_count(other) == 0
    assert "Retry failed (" not in client.get(reverse("campaigns:run_detail", args=[other.pk])).content.decode()
    with pytest.raises(ValidationError, match="whole on their destination or were never needed"):
        runs.retry_failed(other, trigger="command")
