"""Campaign pages: the form validates every knob and explains errors inline; clone, start."""

from __future__ import annotations

import pytest

from campaigns.models import Campaign, Run
from tests.support.factories import endpoint, mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoints():
    return endpoint("src-ep", "mock://src.test/data/"), endpoint("dst-ep", "mock://dst.test/data/?time=0")


def form_data(src, dst, **overrides) -> dict:
    data = {
        "name": "sweep-1", "kind": "transfer", "engine": "gfal2", "sources": [src.pk], "destinations": [dst.pk],
        "source_path": "storageops/source", "destination_path": "storageops/runs", "file_count": "20",
        "file_size": "1 MB", "direction": "forward", "tpc_mode": "auto", "checksum_mode": "none",
        "checksum_algorithm": "adler32", "streams": "1", "tcp_buffer_size": "0", "timeout": "60", "overwrite": "on",
        "create_parent": "on", "retries": "0", "retry_delay": "10", "concurrency_steps": "1, 2, 4", "step_files": "5",
        "step_barrier": "drain",
        "cancel_grace": "10", "cleanup": "keep",
    }  # fmt: skip
    data.update(overrides)
    return data


def test_create_converts_units_and_sweeps(client, admin_user, endpoints):
    client.force_login(admin_user)
    assert client.get("/campaigns/new/").status_code == 200
    response = client.post("/campaigns/new/", form_data(*endpoints, file_mix="90 x 9 GB\n60 x 4GB"))
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get(name="sweep-1")
    assert campaign.file_size == 1_000_000
    assert campaign.concurrency_steps == [1, 2, 4]
    assert campaign.file_mix == [{"count": 90, "size": 9 * 10**9}, {"count": 60, "size": 4 * 10**9}]
    assert list(campaign.sources.all()) == [endpoints[0]]


@pytest.mark.parametrize(
    ("override", "field", "message"),
    [
        ({"concurrency_steps": "1, two"}, "concurrency_steps", "whole numbers separated by commas"),
        ({"concurrency_steps": "1, 0"}, "concurrency_steps", "whole number from 1 to"),
        ({"concurrency_steps": "1, 2", "step_files": ""}, "step_seconds", "needs a step length"),
        ({"file_size": "lots"}, "file_size", "is not a size"),
        ({"file_mix": "90 of 9 GB"}, "file_mix", "count x size"),
        ({"streams": "65"}, "streams", "less than or equal to 64"),
        ({"timeout": "0"}, "timeout", "greater than or equal to 1"),
        ({"checksum_mode": "source"}, "checksum_mode", "known checksum"),
        ({"tpc_mode": "streamed", "engine": "fts"}, "tpc_mode", "needs the gfal2 engine"),
        ({"tpc_mode": "push", "engine": "fts"}, "tpc_mode", "a job cannot ask for push"),
        ({"destinations": []}, "destinations", "at least one destination"),
        ({"name": "bad/name"}, "name", "Use letters, digits"),
        ({"destination_path": "../escape"}, "destination_path", ""),
    ],
)
def test_each_bad_knob_is_explained_at_its_field(client, admin_user, endpoints, override, field, message):
    client.force_login(admin_user)
    response = client.post("/campaigns/new/", form_data(*endpoints, **override))
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors, errors
    assert message in " ".join(errors[field])
    html = response.content.decode()
    assert f'id="id_{field}_errors"' in html or f'id="row-{field}"' in html
    assert not Campaign.objects.exists()


@pytest.mark.parametrize(
    ("field", "typed", "message"),
    [
        # Past the bigint column: once said by its validator, once by the file size rule, with a
        # float's 999,999,000,000,000,032,768 for the size typed.
        ("file_size", "999999 PB", "Files of up to 1,000,000,000,000 bytes may be planned (STORAGEOPS_MAX_FILE_SIZE); "
         "got 999,999,000,000,000,000,000."),
        # A float reads it as 10^12 exactly, a whole number of bytes.
        ("file_size", "1.000000000000000001 TB", "'1.000000000000000001 TB' is not a whole number of bytes."),
        ("file_size", "1000000000001", "Files of up to 1,000,000,000,000 bytes may be planned "
         "(STORAGEOPS_MAX_FILE_SIZE); got 1,000,000,000,001."),
        ("max_bytes", "999999 PB", "At most 9,223,372,036,854,775,807 bytes; got 999,999,000,000,000,000,000."),
        ("max_bytes_per_day", "9223372036854775808", "At most 9,223,372,036,854,775,807 bytes; "
         "got 9,223,372,036,854,775,808."),
        ("max_bytes", "1e999999999", "'1e999999999' is at least 10^30 bytes: too large to be a size."),
    ],
)  # fmt: skip
def test_a_size_too_large_gets_one_message_with_exact_figures(client, admin_user, endpoints, settings, field, typed,
                                                               message):  # fmt: skip
    settings.STORAGEOPS_MAX_FILE_SIZE = 10**12
    client.force_login(admin_user)
    response = client.post("/campaigns/new/", form_data(*endpoints, **{field: typed}))
    assert response.status_code == 400
    assert response.context["form"].errors[field] == [message]
    assert not Campaign.objects.exists()


def test_sizes_are_read_to_the_byte(client, admin_user, endpoints, settings):
    settings.STORAGEOPS_MAX_FILE_SIZE = 10**12
    client.force_login(admin_user)
    # 2^53 + 1 bytes: a float's nearest is 2^53.
    data = form_data(*endpoints, file_size="999.999999999 GB", max_bytes="9007199.254740993 GB", file_mix="3 x 2.5e11")
    response = client.post("/campaigns/new/", data)
    assert response.status_code == 302, response.context["form"].errors
    made = Campaign.objects.get(name="sweep-1")
    assert (made.file_size, made.max_bytes) == (999_999_999_999, 2**53 + 1)
    assert made.file_mix == [{"count": 3, "size": 250_000_000_000}]


def test_edit_keeps_values_and_viewer_cannot(client, admin_user, viewer):
    campaign = mock_campaign("edit-me", concurrency_steps=[1, 2], step_files=5)
    client.force_login(viewer)
    assert client.get(f"/campaigns/{campaign.pk}/edit/").status_code == 403
    client.force_login(admin_user)
    page = client.get(f"/campaigns/{campaign.pk}/edit/").content.decode()
    assert 'value="1, 2"' in page
    data = form_data(campaign.sources.get(), campaign.destinations.get(), name="edit-me", streams="4")
    assert client.post(f"/campaigns/{campaign.pk}/edit/", data).status_code == 302
    campaign.refresh_from_db()
    assert campaign.streams == 4


def test_clone_refuses_a_taken_name_then_copies(client, admin_user):
    campaign = mock_campaign("orig")
    client.force_login(admin_user)
    taken = client.post(f"/campaigns/{campaign.pk}/clone/", {"name": "orig"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    assert client.post(f"/campaigns/{campaign.pk}/clone/", {"name": "orig 2"}).status_code == 302
    copy = Campaign.objects.get(name="orig 2")
    assert list(copy.destinations.all()) == list(campaign.destinations.all())


def test_start_needs_the_operator_role_and_a_runnable_campaign(
    client, viewer, operator, django_capture_on_commit_callbacks
):
    campaign = mock_campaign("startable")
    client.force_login(viewer)
    assert client.post(f"/campaigns/{campaign.pk}/start/").status_code == 403
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(f"/campaigns/{campaign.pk}/start/")
    run = Run.objects.get(campaign=campaign)
    assert response["Location"] == f"/campaigns/runs/{run.pk}/"
    campaign.destinations.clear()
    response = client.post(f"/campaigns/{campaign.pk}/start/", follow=True)
    assert "no destination endpoint" in response.content.decode()


def test_cancel_a_pending_run(client, operator, django_capture_on_commit_callbacks):
    from campaigns import runs

    run = runs.create_run(mock_campaign("cancel-me"))
    client.force_login(operator)
    client.post(f"/campaigns/runs/{run.pk}/cancel/")
    run.refresh_from_db()
    assert run.state == "cancelled"
    again = client.post(f"/campaigns/runs/{run.pk}/cancel/", follow=True)
    assert "nothing to cancel" in again.content.decode()


def test_detail_lists_the_latest_50_runs_in_constant_queries(client, viewer, django_assert_max_num_queries):
    from campaigns import runs

    campaign = mock_campaign("many-runs")
    for _ in range(52):
        runs.create_run(campaign, trigger="command")
    client.force_login(viewer)
    client.get(f"/campaigns/{campaign.pk}/")
    # 13: the page reads the watch line (since when a regression lasts) from the runs it lists;
    # here none of the 50 is judged yet, so it asks once more for the latest judged run.
    with django_assert_max_num_queries(13):
        page = client.get(f"/campaigns/{campaign.pk}/")
    shown = page.context["object"].recent_runs
    assert len(shown) == 50 and shown[0].pk == Run.objects.filter(campaign=campaign).latest("created").pk


def test_form_sections_hold_every_field_once():
    from campaigns.web.forms import CampaignForm

    named = [name for _, names in CampaignForm.SECTIONS for name in names]
    assert sorted(named) == sorted(CampaignForm.base_fields) and len(named) == len(set(named))


def test_every_editable_campaign_field_is_on_the_form():
    """A model error names its field; a field the form lacks would turn that error into a 500."""
    from campaigns.models import Campaign
    from campaigns.web.forms import CampaignForm

    editable = {f.name for f in Campaign._meta.get_fields() if f.concrete and f.editable and not f.auto_created} - {
        "created",
        "last_updated",
    }
    # engine_options is on the form as each engine's own fields (fts_instance, ...).
    assert editable - set(CampaignForm.base_fields) == {"engine_options"}
    assert {"fts_instance", "fts_priority", "fts_strict_copy"} <= set(CampaignForm.base_fields)


def test_an_fts_campaign_gets_its_engine_options_from_the_form(client, admin_user, endpoints):
    from campaigns.runs.engines.fts.models import FtsInstance

    client.force_login(admin_user)
    data = form_data(*endpoints, name="fts-form", engine="fts", tpc_mode="auto", step_files="", concurrency_steps="2")
    refused = client.post("/campaigns/new/", data)
    assert refused.status_code == 400
    assert list(refused.context["form"].errors) == ["fts_instance"]  # said once, at its field
    assert refused.context["form"].errors["fts_instance"] == [
        "Choose the FTS instance that runs this campaign's transfers."
    ]
    instance = FtsInstance.objects.create(name="form-fts", url="https://fts.example.org:8446")
    response = client.post("/campaigns/new/", {**data, "fts_instance": instance.pk, "fts_priority": "5"})
    assert response.status_code == 302, response.content.decode()[:3000]
    campaign = Campaign.objects.get(name="fts-form")
    assert campaign.engine_options == {"instance": instance.pk, "priority": 5, "strict_copy": False, "measure_files": 0}
    page = client.get(f"/campaigns/{campaign.pk}/edit/")
    assert page.context["form"].initial["fts_instance"] == instance.pk


def test_a_target_rate_is_shown_where_it_was_set_and_beside_what_a_run_achieved(client, viewer, settings):
    from campaigns.runs.lifecycle import RunDriver
    from campaigns.runs.starting import create_run

    settings.STORAGEOPS_TARGET_RATE_BPS = 0
    asked = mock_campaign("with-target", file_count=4, target_rate_bps=40_000_000_000)
    plain = mock_campaign("without-target", file_count=4)
    client.force_login(viewer)
    page = client.get(asked.get_absolute_url()).content.decode()
    assert "40 Gbit/s (40000000000 bit/s): the rate verdicts size doors for" in page
    assert "none set: verdicts give no door count" in client.get(plain.get_absolute_url()).content.decode()
    settings.STORAGEOPS_TARGET_RATE_BPS = 10_000_000_000
    assert (
        "the site's 10 Gbit/s (STORAGEOPS_TARGET_RATE_BPS) is used"
        in client.get(plain.get_absolute_url()).content.decode()
    )

    run = create_run(asked, trigger="command")
    RunDriver(run.pk).drive()
    run.refresh_from_db()
    achieved_bits = run.summary["total"]["throughput_bps"] * 8
    page = client.get(run.get_absolute_url()).content.decode()
    assert "asked 40 Gbit/s; achieved" in page
    assert f"({100 * achieved_bits / 40e9:.1f} % of it)" in page


def test_a_url_list_must_lie_below_the_chosen_sources_in_the_form_and_the_api(client, admin_user, endpoints):
    src, dst = endpoints
    outside = "root://elsewhere.example.org:1094//data/file1"
    inside = src.url.rstrip("/") + "/dataset/file1"
    client.force_login(admin_user)
    data = form_data(src, dst, name="listed", source_listing="urls", source_urls=f"{inside}\n{outside}\n",
                     checksum_mode="both")  # fmt: skip
    page = client.post("/campaigns/new/", data)
    assert page.status_code == 400
    assert f"{outside} is below none of the chosen source endpoints." in page.content.decode()
    assert client.post("/campaigns/new/", {**data, "source_urls": inside}).status_code == 302
    body = {"name": "listed-api", "sources": [src.pk], "destinations": [dst.pk], "source_listing": "urls",
            "source_urls": outside, "checksum_mode": "both"}  # fmt: skip
    response = client.post("/api/v1/campaigns/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    [message] = response.json()["error"]["fields"]["source_urls"]
    assert message == f"{outside} is below none of the chosen source endpoints."


def test_a_url_list_may_be_uploaded_as_a_text_file(client, admin_user, endpoints):
    from django.core.files.uploadedfile import SimpleUploadedFile

    src, dst = endpoints
    inside = [src.url.rstrip("/") + f"/dataset/file{i}" for i in range(3)]
    client.force_login(admin_user)
    data = form_data(src, dst, name="uploaded", source_listing="urls", checksum_mode="both")
    bad = SimpleUploadedFile("urls.txt", b"\xff\xfe not text")
    page = client.post("/campaigns/new/", {**data, "source_urls_file": bad})
    assert page.status_code == 400 and "not UTF-8 text" in page.content.decode()
    good = SimpleUploadedFile("urls.txt", ("\n".join(inside) + "\n").encode())
    assert client.post("/campaigns/new/", {**data, "source_urls_file": good}).status_code == 302
    assert Campaign.objects.get(name="uploaded").source_urls.split() == inside
