"""A hostile-input corpus against the API: deep nesting, oversized bodies, NUL characters,
encoded traversal, huge numbers, bodies that do not parse. None may answer 5xx, and every
answer is the one JSON error shape."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from campaigns.models import Campaign
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db

HUGE = 10**400  # no JSON number bound on the wire; Python parses it exactly


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


@pytest.fixture
def source():
    return mock_campaign("hostile").sources.get()


def _campaign(source, **fields) -> dict:
    return {"name": "hostile-new", "sources": [source.pk], "concurrency_steps": [1], **fields}


def _raw(client: APIClient, method: str, path: str, body: bytes | str, content_type: str = "application/json"):
    return getattr(client, method)(path, body, content_type=content_type)


def _assert_shape(response, status: int | None = None) -> dict:
    assert response.status_code < 500, (response.status_code, response.content[:500])
    if status is not None:
        assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/json", response.content[:300]
    error = response.json()["error"]
    assert set(error) == {"status", "message", "fields"}
    assert error["status"] == response.status_code
    assert all(isinstance(m, str) for messages in error["fields"].values() for m in messages)
    return error


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"destination_path": "a/%2e%2e/%2e%2e/b"}, "destination_path"),
        ({"destination_path": "a/%252e%252E/b"}, "destination_path"),
        ({"source_path": "..%2fetc"}, "source_path"),
        ({"destination_path": "a\x00b"}, None),  # NUL: refused by the parser, before any field
        ({"file_size": 2**62}, "file_size"),
        ({"file_size": 2**64}, "file_size"),
        ({"file_size": HUGE}, "file_size"),
        ({"file_count": 2**40}, "file_count"),
        ({"file_count": 4_000_000_000, "file_size": 10**12}, "file_count"),
        ({"file_count": 2**31 - 1, "file_size": 10**12}, "file_size"),
        ({"file_mix": [{"count": 2**31, "size": 10**12}]}, "file_mix"),
        ({"file_mix": [{"count": HUGE, "size": 1}]}, "file_mix"),
        ({"concurrency_steps": [2**70]}, "concurrency_steps"),
        ({"streams": 2**63}, "streams"),
        ({"timeout": -1}, "timeout"),
        ({"tcp_buffer_size": 2**40}, "tcp_buffer_size"),
        ({"source_file_count": HUGE}, "source_file_count"),
        ({"file_mix": json.loads("[" * 40 + "1" + "]" * 40)}, None),
    ],
)
def test_a_hostile_campaign_is_a_400_naming_its_field(admin_api, source, fields, field):
    body = json.dumps(_campaign(source, **fields))
    error = _assert_shape(_raw(admin_api, "post", "/api/v1/campaigns/", body), 400)
    if field:
        assert field in {name.split(".")[0] for name in error["fields"]}, error
    assert not Campaign.objects.filter(name="hostile-new").exists()


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "status"),
    [
        ("post", "/api/v1/campaigns/", "[" * 100_000 + "]" * 100_000, "application/json", 400),
        ("post", "/api/v1/events/", '{"kind": "note", "summary": ' + "[" * 5000 + "]" * 5000 + "}", None, 400),
        ("post", "/api/v1/events/", '{"kind": "note", "summary": "a\\u0000b"}', None, 400),
        ("post", "/api/v1/events/", '{"kind": "note", "summary": "x", "detail": {"k\\u0000": 1}}', None, 400),
        ("post", "/api/v1/events/", '{"kind": "note", "summary": ', None, 400),
        ("post", "/api/v1/events/", b'{"kind": "note", "summary": "\xff\xfe"}', None, 400),
        ("post", "/api/v1/events/", '{"kind": "note", "summary": "x", "time": NaN}', None, 400),
        ("post", "/api/v1/events/", "<xml/>", "application/xml", 415),
        ("post", "/api/v1/backends/", "name=a%00b&access_layer=xrootd", "application/x-www-form-urlencoded", 400),
        ("get", "/api/v1/backends/?name=a%00b", None, None, None),
        ("get", "/api/v1/runs/?campaign=99999999999999999999999", None, None, 400),
        ("get", "/api/v1/transfers/?run=-1&size__gte=1e400", None, None, None),
        ("get", "/api/v1/events/?time__gte=not-a-time", None, None, None),
        ("get", "/api/v1/runs/99999999999999999999999/", None, None, 404),
        ("get", "/api/v1/compare/?runs=1,99999999999999999999999", None, None, None),
        ("get", "/api/v1/%2e%2e/%2e%2e/etc/passwd", None, None, 404),
    ],
)
def test_hostile_requests_answer_in_the_error_shape(admin_api, method, path, body, content_type, status):
    if body is None:
        response = getattr(admin_api, method)(path)
        if response.status_code < 400:
            return  # a filter that ignores a value it cannot use is fine, as long as it is not a 5xx
    else:
        response = _raw(admin_api, method, path, body, content_type or "application/json")
    _assert_shape(response, status)


def test_a_multipart_json_field_nested_past_the_recursion_limit_is_a_400(admin_api, source):
    campaign = mock_campaign("multipart-deep")
    response = admin_api.put(
        f"/api/v1/campaigns/{campaign.pk}/",
        {"name": "multipart-deep", "sources": [source.pk], "file_mix": "[" * 100_000 + "]" * 100_000},
        format="multipart",
    )
    _assert_shape(response, 400)


@override_settings(STORAGEOPS_MAX_REQUEST_BYTES=1_000_000)
def test_an_oversized_body_is_a_413_in_json(admin_api):
    body = json.dumps({"kind": "note", "summary": "x" * 20_000_000})
    error = _assert_shape(_raw(admin_api, "post", "/api/v1/events/", body), 413)
    assert "at most 1,000,000" in error["message"]


def test_an_oversized_form_on_a_page_is_a_413_not_a_500(client, operator):
    client.force_login(operator)
    response = client.post("/hosts/events/new/", {"summary": "x" * 3_000_000})
    assert response.status_code == 413


def test_a_field_named_detail_cannot_take_the_place_of_the_message(admin_api):
    # Event.detail is text: a NUL character in it (sent as a form) is a field error of "detail".
    response = admin_api.post("/api/v1/events/", {"kind": "note", "summary": "x", "detail": "a\x00b"},
                              format="multipart")  # fmt: skip
    error = _assert_shape(response, 400)
    assert error["message"] == "Some fields are not valid."
    assert error["fields"] == {"detail": ["Null characters are not allowed."]}, error


def test_the_api_root_lists_the_api_for_a_viewer_and_refuses_no_role(viewer, outsider):
    client = APIClient()
    client.force_authenticate(viewer)
    assert "campaigns" in client.get("/api/v1/").json()
    client.force_authenticate(outsider)
    _assert_shape(client.get("/api/v1/"), 403)
