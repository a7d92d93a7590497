"""A copy is made in the mode its campaign asked for, or it fails saying so.

gfal2 picks its copy path from the URLs' schemes: between two root:// doors it always runs a
third-party copy. A campaign asking a mode its endpoints cannot give is refused when saved (the
model, the form, the API), a copy reported in another mode is failed (`mode_not_honoured`), and
"streamed" between two root:// doors streams through the copying process: the bytes it reads
from its sockets (/proc/self/io, the driver runs in this process) are the bytes copied.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from campaigns import runs
from campaigns.choices import RunState
from campaigns.models import Run, Transfer, campaign_rules
from campaigns.runs.engines.gfal2 import modes
from campaigns.runs.lifecycle import RunDriver
from tests.campaigns.runs.test_real_transfers import check_destinations
from tests.support.api import api
from tests.support.factories import campaign, endpoint

ROOT_A, ROOT_B = "root://a.test:1094//data/", "root://b.test:1094//data/"


@pytest.mark.parametrize(
    ("source", "destination", "mode", "refused"),
    [
        (ROOT_A, ROOT_B, "pull", False),
        (ROOT_A, ROOT_B, "streamed", False),
        (ROOT_A, ROOT_B, "push", True),  # XRootD's TPC is the destination pulling
        ("davs://a.test/d/", "https://b.test/d/", "push", False),
        ("gsiftp://a.test/d/", "gsiftp://b.test/d/", "pull", True),  # GridFTP's TPC is reported as push
        (ROOT_A, "davs://b.test/d/", "pull", True),  # no TPC between two protocols
        ("file:///tmp/x/", ROOT_B, "streamed", False),
        ("mock://a.test/d/", "mock://b.test/d/", "push", False),  # no rule known: gfal2 decides
        (ROOT_A, ROOT_B, "auto", False),
    ],
)
def test_which_modes_gfal2_can_give_between_two_schemes(source, destination, mode, refused):
    problem = modes.mode_error([mode], [(source, destination)])
    assert bool(problem) is refused, problem
    if refused:
        assert mode in problem and source in problem


def test_a_reported_mode_other_than_asked_is_a_mismatch():
    assert modes.mode_mismatch("streamed", "3rd pull")
    assert modes.mode_mismatch("pull", "3rd pull") is None
    assert modes.mode_mismatch("auto", "3rd push") is None
    assert modes.mode_mismatch("push", "") is None  # a plugin that reports nothing (mock)


def _judged(obj) -> dict[str, str]:
    """A saved campaign against its saved endpoints, as a run's start checks it."""
    return campaign_rules.errors(obj, campaign_rules.Relations.saved(obj))


@pytest.mark.django_db
def test_a_saved_campaign_asking_a_mode_its_doors_cannot_give_is_refused_and_never_started():
    obj = campaign("root-push", [endpoint("ra", ROOT_A)], [endpoint("rb", ROOT_B)], tpc_mode="push")
    assert "root:// to root:// in push mode" in _judged(obj)["tpc_mode"]
    with pytest.raises(ValidationError, match="root:// to root:// in push mode"):
        runs.create_run(obj, trigger="command")
    obj.tpc_mode, obj.sweep = "pull", {"tpc_mode": ["pull", "push"]}
    obj.step_files = 10
    assert "in push mode" in _judged(obj)["tpc_mode"]
    obj.sweep = {"tpc_mode": ["pull", "streamed"]}
    assert _judged(obj) == {}
    # Reverse copies run from the destinations to the sources: the check follows them.
    davs = endpoint("da", "davs://a.test/d/")
    mixed = campaign("mixed", [davs], [endpoint("rc", ROOT_B)], tpc_mode="streamed", direction="reverse")
    assert _judged(mixed) == {}
    mixed.tpc_mode = "pull"
    assert "root:// to http" in _judged(mixed)["tpc_mode"]


@pytest.mark.django_db
def test_the_form_and_the_api_refuse_it_with_the_reason(client, admin_user):
    from tests.dashboard.test_campaign_pages import form_data

    src, dst = endpoint("fa", ROOT_A), endpoint("fb", ROOT_B)
    client.force_login(admin_user)
    response = client.post("/campaigns/new/", form_data(src, dst, tpc_mode="push"))
    assert response.status_code == 400
    assert "root:// to root:// in push mode" in " ".join(response.context["form"].errors["tpc_mode"])
    assert client.post("/campaigns/new/", form_data(src, dst, tpc_mode="streamed")).status_code == 302

    body = {"name": "api-push", "sources": [src.pk], "destinations": [dst.pk], "tpc_mode": "push"}
    refused = api(admin_user, "admin").post("/api/v1/campaigns/", body, format="json")
    assert refused.status_code == 400, refused.content
    assert "in push mode" in refused.json()["error"]["fields"]["tpc_mode"][0]
    made = api(admin_user, "admin").post("/api/v1/campaigns/", {**body, "tpc_mode": "pull"}, format="json")
    assert made.status_code == 201, made.content


@pytest.mark.django_db
def test_an_api_patch_of_endpoints_and_mode_together_is_judged_on_the_new_endpoints(admin_user):
    client = api(admin_user, "admin")
    roots = [endpoint("pa", ROOT_A).pk], [endpoint("pb", ROOT_B).pk]
    webs = [endpoint("wa", "davs://a.test/d/").pk], [endpoint("wb", "https://b.test/d/").pk]
    body = {"name": "patched", "sources": roots[0], "destinations": roots[1], "tpc_mode": "pull"}
    made = client.post("/api/v1/campaigns/", body, format="json")
    assert made.status_code == 201, made.content
    url = f"/api/v1/campaigns/{made.json()['id']}/"
    # HTTP doors push: allowed, although the root:// doors it leaves could not.
    moved = client.patch(url, {"sources": webs[0], "destinations": webs[1], "tpc_mode": "push"}, format="json")
    assert moved.status_code == 200, moved.content
    assert moved.json()["tpc_mode"] == "push" and moved.json()["sources"] == webs[0]
    # And back to root:// doors still asking push: refused with the reason, nothing changed.
    back = client.patch(url, {"sources": roots[0], "destinations": roots[1]}, format="json")
    assert back.status_code == 400, back.content
    assert "root:// to root:// in push mode" in back.json()["error"]["fields"]["tpc_mode"][0]
    assert client.get(url).json()["sources"] == webs[0]
    # Only one side changed: the other is the campaign's own.
    one_side = client.patch(url, {"destinations": roots[1], "tpc_mode": "push"}, format="json")
    assert one_side.status_code == 400 and "in push mode" in one_side.json()["error"]["fields"]["tpc_mode"][0]


@pytest.mark.django_db
@pytest.mark.parametrize(("mode", "said"), [("streamed", "streamed mode needs the gfal2 engine"),
                                            ("pull", "a job cannot ask for pull"),
                                            ("push", "a job cannot ask for push")])  # fmt: skip
def test_an_fts_campaign_asking_a_copy_mode_is_refused_at_creation_with_the_reason(admin_user, mode, said):
    """FTS runs its own copies: streamed is not one of them, and a job has no field for pull or
    push (its transfers record no mode), so only auto is honoured."""
    from campaigns.runs.engines.fts.models import FtsInstance

    fts = FtsInstance.objects.create(name="modes-fts", url="https://fts.example.org:8446")
    body = {"name": f"fts-{mode}", "sources": [endpoint("fs", "davs://a.test/d/").pk],
            "destinations": [endpoint("fd", "davs://b.test/d/").pk], "engine": "fts",
            "engine_options": {"instance": fts.pk}, "tpc_mode": mode}  # fmt: skip
    refused = api(admin_user, "admin").post("/api/v1/campaigns/", body, format="json")
    assert refused.status_code == 400, refused.content
    assert said in refused.json()["error"]["fields"]["tpc_mode"][0]
    made = api(admin_user, "admin").post("/api/v1/campaigns/", {**body, "tpc_mode": "auto"}, format="json")
    assert made.status_code == 201, made.content


def _bytes_read_by_this_process() -> int:
    """rchar: every byte this process read from files and sockets, whichever thread read it."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.django_db(transaction=True)
def test_streamed_between_two_root_doors_passes_the_bytes_through_the_worker(xrootd_pair):
    door1, door2 = xrootd_pair
    count, size = 6, 4_000_000
    measured = {}
    for mode in ("pull", "streamed"):
        src = endpoint(f"d1-{mode}", door1.root_url_for(f"/data/modes-{mode}/"))
        dst = endpoint(f"d2-{mode}", door2.root_url_for(f"/data/modes-{mode}/"))
        obj = campaign(
            f"root-{mode}", [src], [dst], file_count=count, file_size=size, create_sources=True,
            checksum_mode="both", tpc_mode=mode, concurrency_steps=[2],
        )  # fmt: skip
        run = runs.create_run(obj, trigger="command")
        before = _bytes_read_by_this_process()
        RunDriver(run.pk).drive()
        measured[mode] = _bytes_read_by_this_process() - before
        run = Run.objects.get(pk=run.pk)
        rows = Transfer.objects.filter(run=run)
        assert run.state == RunState.SUCCEEDED, list(rows.values_list("error_message", flat=True))
        assert set(rows.values_list("copy_mode", flat=True)) == {"3rd pull" if mode == "pull" else "streamed"}
        check_destinations(run, door1, door2)
    print(f"bytes read by the driving process: {measured} for {count * size} copied each")
    # The sources are uploaded before each run's copies: those are writes, not reads.
    assert measured["streamed"] >= count * size
    assert measured["pull"] < count * size / 4  # the doors copied between themselves
