"""Failures the fuzzer found once, kept as plain tests: every API error is JSON in one shape."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from campaigns.models import Campaign
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/api/v1/runs/0.5/"),
        ("post", "/api/v1/runs/0.5/cancel/"),
        ("post", "/api/v1/campaigns/0.5/start/"),
        ("put", "/api/v1/hosts/1e-308/"),
        ("get", "/api/v1/no-such-thing/"),
    ],
)
def test_a_path_django_cannot_resolve_answers_in_the_api_error_shape(admin_api, method, path):
    response = getattr(admin_api, method)(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": {"status": 404, "message": "Not found.", "fields": {}}}


def test_pages_outside_the_api_keep_the_html_404(admin_user, client):
    client.force_login(admin_user)
    response = client.get("/campaigns/0.5/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_null_for_a_not_null_json_field_is_a_field_error_not_a_500(admin_api):
    campaign = mock_campaign("nullable")
    source = campaign.sources.get()
    # Multipart form data: DRF parses the string "null" of a JSON field into None.
    response = admin_api.put(
        f"/api/v1/campaigns/{campaign.pk}/",
        {"name": "nullable", "file_mix": "null", "sources": [source.pk]},
        format="multipart",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {"file_mix": ["This field may not be null."]}
    assert Campaign.objects.get(pk=campaign.pk).file_mix == []


@pytest.mark.parametrize(
    "query, status, count",
    [
        ("limit=19435069858377723904", 200, 1),  # capped at the page size limit, not an overflow
        ("offset=19435069858377723904", 400, None),
        ("limit=-1", 200, 1),
    ],
)
def test_page_bounds_are_checked_before_the_database(admin_api, query, status, count):
    mock_campaign("paged")
    response = admin_api.get(f"/api/v1/campaigns/?{query}")
    assert response.status_code == status, response.content
    if count is not None:
        assert len(response.json()["results"]) == count
    else:
        assert response.json()["error"]["fields"] == {"offset": ["Give an offset from 0 to 9223372036854775807."]}


@pytest.mark.parametrize(
    "fields, field, says",
    [
        ({"file_size": 10**18}, "file_size", "STORAGEOPS_MAX_FILE_SIZE"),
        ({"file_mix": [{"count": 10, "size": 10**18}]}, "file_mix", "STORAGEOPS_MAX_FILE_SIZE"),
        # Each within the limit, together more bytes than a bigint counts.
        ({"file_count": 2_000_000_000, "file_size": 2**62}, "file_size", "more bytes than can be counted"),
    ],
)
def test_file_sizes_past_the_limit_are_a_clear_400(admin_api, settings, fields, field, says):
    settings.STORAGEOPS_MAX_FILE_SIZE = 2**62 if "file_count" in fields else 10**12
    campaign = mock_campaign("sized")
    source = campaign.sources.get()
    body = {"name": "sized", "sources": [source.pk], **fields}
    response = admin_api.put(f"/api/v1/campaigns/{campaign.pk}/", body, format="json")
    assert response.status_code == 400, response.content
    assert says in response.json()["error"]["fields"][field][0]
    assert Campaign.objects.get(pk=campaign.pk).file_size == campaign.file_size
