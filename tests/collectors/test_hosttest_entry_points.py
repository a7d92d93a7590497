"""Starting, reading and cancelling host-test series: the API, the host page's form and
manage.py host_test (run here, on this machine's disk)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from collectors.models import Host, HostTestSeries

pytestmark = pytest.mark.django_db


@pytest.fixture
def host(tmp_path, settings) -> Host:
    settings.STORAGEOPS_HOST_TEST_DIR = str(tmp_path / "hosttests")
    return Host.objects.create(name="door-t")


def test_the_api_starts_lists_and_cancels_a_series(client, operator, viewer, host):
    params = {"tool": "dd", "name": "rbd", "size": "1G", "block_size": "10M", "repeats": 50_000,
              "byte_budget": "50T", "reference": True}  # fmt: skip
    client.force_login(viewer)
    refused = client.post(f"/api/v1/hosts/{host.pk}/tests/", {"params": params}, content_type="application/json")
    assert refused.status_code == 403
    client.force_login(operator)
    created = client.post(f"/api/v1/hosts/{host.pk}/tests/", {"params": params}, content_type="application/json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["state"], body["repeats"], body["host"]) == ("queued", 50_000, "door-t")
    # Every parameter, the defaults the request left out included; the request as it was beside.
    assert body["params"]["cold"] is True and body["params"]["rolling"] == 50 and body["params"]["direct"] is False
    assert body["params"]["block_size"] == 10 << 20 and body["requested_params"] == params
    listed = client.get(f"/api/v1/hosts/{host.pk}/tests/").json()
    assert [s["id"] for s in listed["results"]] == [body["id"]] and listed["results"][0]["results"] == []
    cancelled = client.post(f"/api/v1/host-tests/{body['id']}/cancel/")
    assert cancelled.status_code == 202 and cancelled.json()["cancel_requested"] is True
    too_much = {**params, "byte_budget": "1T"}
    bad = client.post(f"/api/v1/hosts/{host.pk}/tests/", {"params": too_much}, content_type="application/json")
    assert bad.status_code == 400
    assert "more than its byte budget" in bad.json()["error"]["fields"]["params"][0]


def test_the_host_page_form_explains_a_bad_series_and_starts_a_good_one(client, operator, host):
    client.force_login(operator)
    form = {"tool": "dd", "name": "fzu", "rw": "read", "size": "1M", "block_size": "10M", "repeats": "3",
            "cold": "on", "reference": "on", "rolling": "50"}  # fmt: skip
    page = client.post(f"/hosts/{host.pk}/tests/", form)
    assert page.status_code == 400
    assert "size must be between 10485760" in page.content.decode()  # a file smaller than one block
    assert not HostTestSeries.objects.exists()
    started = client.post(f"/hosts/{host.pk}/tests/", {**form, "block_size": "256k"})
    series = HostTestSeries.objects.get()
    assert started.status_code == 302 and started.url == f"/hosts/tests/{series.pk}/"
    assert series.params["block_size"] == "256k" and series.created_by == operator
    shown = client.get(started.url)
    assert shown.status_code == 200 and "cold=True" in shown.content.decode()


def test_manage_py_host_test_runs_a_series_here_and_prints_each_result(host, capsys):
    call_command("host_test", "door-t", "--size", "4M", "--block-size", "1M", "--repeats", "3", "--reference", "--here")
    out = capsys.readouterr().out
    assert "succeeded" in out and out.count(" read ") >= 3 and "direct read" in out
    series = HostTestSeries.objects.get()
    assert series.results.count() == 3
    assert out.count("0% resident before the read") == 3  # cold by default, measured
    with pytest.raises(CommandError, match="more than its byte budget"):
        call_command("host_test", "door-t", "--size", "1G", "--repeats", "50000", "--byte-budget", "1T", "--here")
    with pytest.raises(CommandError, match="Unknown host"):
        call_command("host_test", "nowhere")
