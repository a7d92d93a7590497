"""The one path rule (storageops.paths) against a hostile corpus: every input that names a path
or a URL, every form of attack, through the REST API and through the web forms. Every cell must
be refused with its field named, nothing created, and nothing outside an endpoint read or
written: a sentinel folder outside (and the data beside the endpoints) keeps its contents,
sizes, modification and access times, after the corpus and after the readiness checks and the
run that could be started with rows stored before the rule.

Run with -s to see the corpus table (input x attack -> refused, field):
    .venv/bin/python -m pytest -p no:xdist -s --basetemp=/tmp/paths-bt tests/test_path_rule.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from campaigns import readiness
from campaigns.choices import RunState
from campaigns.models import Campaign, Endpoint, ReadinessCheck, Run
from campaigns.runs import starting
from campaigns.runs.lifecycle import RunDriver
from collectors.models import Host, HostTestSeries
from storageops import paths
from tests.support.api import api
from tests.support.factories import backend, endpoint

PROBE = b"sentinel data that no request may read or change\n"


@dataclass
class Place:
    """The folders of the corpus: two file:// endpoints below the deployment's root, data beside
    them, a sentinel outside every root, and symbolic links from inside to the sentinel."""

    tmp: Path

    @property
    def root(self) -> Path:
        return self.tmp / "roots"

    @property
    def source(self) -> str:
        return f"file://{self.root}/fileep/"

    @property
    def door(self) -> str:
        return f"file://{self.root}/door/"

    @property
    def existing(self) -> Path:
        return self.root / "existing" / "ds_02.root"

    @property
    def sentinel(self) -> Path:
        return self.tmp / "sentinel"

    @property
    def hosttests(self) -> Path:
        return self.tmp / "hosttests"

    def build(self) -> None:
        for folder in ("fileep/sub", "door", "existing", "fileep2"):
            (self.root / folder).mkdir(parents=True)
        (self.root / "fileep" / "ds_01.root").write_bytes(PROBE)
        self.existing.write_bytes(PROBE)
        (self.root / "fileep2" / "ds_03.root").write_bytes(PROBE)
        (self.tmp / "roots2").mkdir()
        self.sentinel.mkdir()
        for name in ("s1.dat", "s2.dat"):
            (self.sentinel / name).write_bytes(PROBE)
        self.hosttests.mkdir()
        # Folders inside an endpoint (and the host-test folder) that lead to the sentinel.
        (self.root / "fileep" / "link").symlink_to(self.sentinel, target_is_directory=True)
        (self.root / "fileep" / "storageops-readiness").symlink_to(self.sentinel, target_is_directory=True)
        (self.hosttests / "link").symlink_to(self.sentinel, target_is_directory=True)


class Watch:
    """Everything below tmp but the endpoints' own folders: each entry's type, size, mtime and
    atime. Access times are set before the mtimes so that a read shows (relatime updates an atime
    older than the mtime); the comparison only stats, it never reads or lists what it watches."""

    OWN = ("roots/fileep", "roots/door")

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.entries = [p for p in sorted(tmp.rglob("*")) if not self._own(p) or p.is_symlink()]
        self.listing = self._names()  # before the access times are set: listing a folder reads it
        for entry in self.entries:
            st = entry.lstat()
            if not entry.is_symlink():
                os.utime(entry, ns=(st.st_mtime_ns - 10**15, st.st_mtime_ns))
        self.before = self.stats()

    def _own(self, path: Path) -> bool:
        """Inside an endpoint's own folder (where a valid request may write)."""
        relative = str(path.relative_to(self.tmp))
        return any(relative == own or relative.startswith(own + "/") for own in self.OWN)

    def stats(self) -> dict[str, tuple]:
        out = {}
        for entry in self.entries:
            st = entry.lstat()
            # A link's own access time moves when the rule resolves it (readlink): not a read of data.
            atime = None if entry.is_symlink() else st.st_atime_ns
            out[str(entry.relative_to(self.tmp))] = (st.st_mode, st.st_size, st.st_mtime_ns, atime)
        return out

    def _names(self) -> set[str]:
        return {str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*") if not self._own(p)}

    def assert_untouched(self) -> None:
        after = self.stats()
        changed = {name: (self.before[name], after[name]) for name in after if after[name] != self.before[name]}
        assert not changed, f"read or written outside the endpoints: {changed}"
        # Listed last: listing the folders changes their access times.
        assert self._names() - {"logs"} == self.listing - {"logs"}, "an entry appeared or went outside the endpoints"
        for name in ("s1.dat", "s2.dat"):
            assert (self.tmp / "sentinel" / name).read_bytes() == PROBE


# --- the corpus: every attack in the form each kind of input takes ---------------------------
# Kinds: "endpoint" (an endpoint's URL prefix), "listed" (a URL in a source list), "relative" (a
# campaign folder below its endpoints), "local" (a path on a host), "subdir" (below the host-test
# folder). None: the attack has no meaning for that kind of input (said in the table, with why).
def attacks(p: Place) -> dict[str, dict[str, str | None]]:
    e, root, ex = p.source, p.root, p.existing
    return {
        "..": {"endpoint": e + "sub/../../escaped/", "listed": e + "../existing/ds_02.root",
               "relative": "sub/../../escaped", "local": "/etc/xrootd/../../root/.ssh/id_rsa",
               "subdir": "sub/../../escaped"},
        "%2e%2e": {"endpoint": e + "sub/%2e%2e/%2e%2e/escaped/", "listed": e + "%2e%2e/existing/ds_02.root",
                   "relative": "sub/%2e%2e/%2e%2e/escaped", "local": "/etc/%2e%2e/root/x", "subdir": "%2e%2e"},
        "%252e%252e": {"endpoint": e + "%252e%252e/escaped/", "listed": e + "%252e%252e/existing/ds_02.root",
                       "relative": "sub/%252e%252e/%252e%252e/x", "local": "/etc/%252e%252e/root/x",
                       "subdir": "%252e%252e"},
        ".%2e": {"endpoint": e + ".%2e/escaped/", "listed": e + ".%2e/existing/ds_02.root",
                 "relative": ".%2e/escaped", "local": "/etc/.%2e/root/x", "subdir": ".%2e"},
        "%2e.": {"endpoint": e + "%2e./escaped/", "listed": e + "%2e./existing/ds_02.root",
                 "relative": "%2e./escaped", "local": "/etc/%2e./root/x", "subdir": "%2e."},
        "..%2f": {"endpoint": e + "..%2fescaped/", "listed": e + "..%2fexisting/ds_02.root",
                  "relative": "..%2f..%2fescaped", "local": "/etc/..%2froot/x", "subdir": "..%2fescaped"},
        "%2f..": {"endpoint": e + "sub%2f..%2f..%2fescaped/", "listed": e + "sub%2f..%2f..%2fexisting/ds_02.root",
                  "relative": "sub%2f..%2f..%2fescaped", "local": "/etc%2f..%2froot/x", "subdir": "sub%2f.."},
        "backslash ..\\": {"endpoint": e + "..\\escaped/", "listed": e + "..\\existing\\ds_02.root",
                           "relative": "sub\\..\\..\\escaped", "local": "/etc\\..\\root\\x", "subdir": "..\\x"},
        "%5c (encoded \\)": {"endpoint": e + "..%5cescaped/", "listed": e + "..%5cexisting%5cds_02.root",
                             "relative": "sub%5c..%5c..%5cescaped", "local": "/etc%5c..%5croot", "subdir": "..%5cx"},
        "NUL %00": {"endpoint": e + "sub%00/", "listed": e + "ds_01.root%00.txt", "relative": "sub%00x",
                    "local": "/etc/xrootd/door.cfg%00", "subdir": "sub%00"},
        "absolute path": {"endpoint": "/etc/", "listed": str(ex), "relative": str(root / "existing"),
                          "local": None, "subdir": str(p.sentinel)},
        "// trick": {"endpoint": "file:////etc/", "listed": f"file:///{ex}", "relative": "//etc",
                     "local": None, "subdir": "//etc"},
        "other scheme": {"endpoint": "ftp://127.0.0.1/escaped/", "listed": f"root://127.0.0.1:1094/{ex}",
                         "relative": f"root://127.0.0.1:1094/{ex.parent}", "local": f"file://{ex}",
                         "subdir": "file:///etc"},
        "other host": {"endpoint": f"file://evil.example.org{root}/fileep/",
                       "listed": f"file://evil.example.org{root}/fileep/ds_01.root",
                       "relative": "//evil.example.org/share", "local": None, "subdir": "//evil.example.org/x"},
        "other port": {"endpoint": f"file://localhost:8080{root}/fileep/",
                       "listed": "root://127.0.0.1:1095//data/ds_01.root",
                       "relative": "root://127.0.0.1:1095//data", "local": None, "subdir": None},
        "symlinked folder": {"endpoint": e + "link/", "listed": e + "link/s1.dat", "relative": "link/escaped",
                             "local": None, "subdir": "link"},
        "prefix sibling": {"endpoint": f"file://{p.tmp}/roots2/", "listed": f"file://{root}/fileep2/ds_03.root",
                           "relative": None, "local": None, "subdir": None},
    }  # fmt: skip


NOT_AN_ATTACK = {
    "local": "any absolute path on a host may be watched",
    "relative": "a relative path has no prefix of its own",
    "subdir": "no port, no sibling: one folder below the host-test root",
}


@dataclass
class Input:
    name: str
    kind: str
    field: str  # the field the refusal must name
    api: Callable[[str], object] | None
    form: Callable[[str], object] | None
    form_field: str = ""  # where the form's name differs from the API's

    @property
    def field_in_form(self) -> str:
        return self.form_field or self.field


def inputs(p: Place, operator, admin_user, client_factory, ids: dict) -> list[Input]:
    op_api, admin_api = api(operator, "operator"), api(admin_user, "admin")
    # Campaigns, endpoints and hosts are the admin role's to define; host tests the operator's.
    web_admin = client_factory(admin_user)
    counter = iter(range(10**6))

    def name() -> str:
        return f"corpus-{next(counter)}"

    def campaign_api(**fields):
        body = {"name": name(), "sources": ids["sources"], "destinations": ids["destinations"],
                "concurrency_steps": [1], "checksum_mode": "none", **fields}  # fmt: skip
        return admin_api.post("/api/v1/campaigns/", body, format="json")

    def campaign_form(**fields):
        data = {
            "name": name(), "kind": "transfer", "engine": "gfal2", "sources": ids["sources"],
            "destinations": ids["destinations"], "source_path": "data", "destination_path": "runs",
            "file_count": "2", "file_size": "1 kB", "direction": "forward", "tpc_mode": "auto",
            "checksum_mode": "none", "checksum_algorithm": "adler32", "streams": "1", "tcp_buffer_size": "0",
            "timeout": "60", "overwrite": "on", "create_parent": "on", "retries": "0", "retry_delay": "10",
            "concurrency_steps": "1", "step_barrier": "drain", "cancel_grace": "10", "cleanup": "keep", **fields,
        }  # fmt: skip
        return web_admin.post("/campaigns/new/", data)

    def urls(value: str) -> str:
        return f"{p.source}ds_01.root\n{value}\n"

    return [
        Input("endpoint URL", "endpoint", "url_prefix",
              lambda v: admin_api.post("/api/v1/endpoints/",
                                       {"name": name(), "backend": ids["backend"], "url_prefix": v}, format="json"),
              lambda v: web_admin.post("/admin/campaigns/endpoint/add/",
                                       {"name": name(), "backend": ids["backend"], "url": v}), "url"),
        Input("campaign source path", "relative", "source_path",
              lambda v: campaign_api(source_path=v), lambda v: campaign_form(source_path=v)),
        Input("campaign destination path", "relative", "destination_path",
              lambda v: campaign_api(destination_path=v), lambda v: campaign_form(destination_path=v)),
        Input("listed folder (existing data)", "relative", "source_path",
              lambda v: campaign_api(source_listing="folder", source_path=v),
              lambda v: campaign_form(source_listing="folder", source_path=v)),
        Input("URL list (existing data)", "listed", "source_urls",
              lambda v: campaign_api(source_listing="urls", source_urls=urls(v)),
              lambda v: campaign_form(source_listing="urls", source_urls=urls(v))),
        Input("host watched files", "local", "watched_files",
              lambda v: admin_api.post("/api/v1/hosts/", {"name": name(), "watched_files": [v]}, format="json"),
              lambda v: web_admin.post("/admin/collectors/host/add/",
                                       {"name": name(), "role": "door", "sample_interval": "5",
                                        "client_weight": "1", "watched_files": json.dumps([v]),
                                        "watched_services": "[]", "watched_filesystems": "[]",
                                        "log_files": "[]"})),
        Input("host watched filesystems", "local", "watched_filesystems",
              lambda v: admin_api.post("/api/v1/hosts/", {"name": name(), "watched_filesystems": [v]}, format="json"),
              lambda v: web_admin.post("/admin/collectors/host/add/",
                                       {"name": name(), "role": "door", "sample_interval": "5",
                                        "client_weight": "1", "watched_files": "[]", "watched_services": "[]",
                                        "watched_filesystems": json.dumps([v]), "log_files": "[]"})),
        Input("host-test folder (subdir)", "subdir", "params",
              lambda v: op_api.post(f"/api/v1/hosts/{ids['host']}/tests/",
                                    {"params": {"tool": "dd", "rw": "write", "size": "1M", "block_size": "1M",
                                                "subdir": v}}, format="json"),
              None),
    ]  # fmt: skip


def _api_refusal(response, field: str) -> str:
    assert response.status_code == 400, (response.status_code, response.content[:500])
    fields = response.json()["error"]["fields"]
    assert field in fields, fields
    return field


def _form_refusal(response, field: str) -> str:
    # The campaign form answers 400; Django's admin re-renders its form (200) with the errors.
    assert response.status_code in (200, 400), (response.status_code, response.content[:300])
    form = response.context.get("adminform").form if response.context.get("adminform") else response.context["form"]
    assert field in form.errors, (field, form.errors)
    return field


def _counts() -> tuple[int, ...]:
    return tuple(m.objects.count() for m in (Endpoint, Campaign, Host, HostTestSeries, ReadinessCheck, Run))


@pytest.fixture
def place(tmp_path, settings) -> Place:
    place = Place(tmp_path / "corpus")
    place.tmp.mkdir()
    place.build()
    settings.STORAGEOPS_FILE_ROOTS = [str(place.root)]
    settings.STORAGEOPS_HOST_TEST_DIR = str(place.hosttests)
    return place


@pytest.mark.django_db(transaction=True)  # the run's driver commits as it goes
def test_every_input_refuses_every_attack_and_nothing_outside_is_touched(place, operator, admin_user):
    from django.test import Client

    def client_factory(user):
        client = Client()
        client.force_login(user)
        return client

    kit = backend("corpus-disk")
    src = endpoint("corpus-src", place.source, backend_name="corpus-disk")
    xroot = endpoint("corpus-xroot", "root://127.0.0.1:1094//data/", backend_name="corpus-disk")
    dst = endpoint("corpus-door", place.door, backend_name="corpus-disk")
    host = Host.objects.create(name="corpus-host")
    ids = {"backend": kit.pk, "sources": [src.pk, xroot.pk], "destinations": [dst.pk], "host": host.pk}
    watch = Watch(place.tmp)
    before = _counts()

    table: list[tuple[str, str, str, str]] = []
    corpus = attacks(place)
    for item in inputs(place, operator, admin_user, client_factory, ids):
        for attack, forms in corpus.items():
            value = forms[item.kind]
            if value is None:
                table.append((item.name, attack, f"n/a: {NOT_AN_ATTACK[item.kind]}", ""))
                continue
            api_said = _api_refusal(item.api(value), item.field)
            form_said = _form_refusal(item.form(value), item.field_in_form) if item.form else "(no web form)"
            table.append((item.name, attack, f"refused: API 400 {api_said}", f"form {form_said}"))
    assert _counts() == before, "a hostile input created an object"

    _rows_stored_before_the_rule_are_refused_when_used(place, src, dst, operator)
    watch.assert_untouched()
    refused = sum(1 for row in table if row[2].startswith("refused"))
    print(f"\nPath-rule corpus: {refused} cells refused, {len(table) - refused} n/a, 0 objects created, "
          "0 bytes read or written outside the endpoints")  # fmt: skip
    width = max(len(r[0]) for r in table)
    print(f"{'input':<{width}}  {'attack':<18}  result")
    for name, attack, api_result, form_result in table:
        print(f"{name:<{width}}  {attack:<18}  {api_result}{'; ' + form_result if form_result else ''}")


def _rows_stored_before_the_rule_are_refused_when_used(place: Place, src, dst, operator) -> None:
    """What the input checks cannot see: an endpoint row stored before the rule, a folder that is
    a link to outside, a URL list changed behind the form. Each is refused where it is used."""
    op_api = api(operator, "operator")
    legacy = endpoint("corpus-legacy", f"file://{place.root}/legacy/", backend_name="corpus-disk")
    Endpoint.objects.filter(pk=legacy.pk).update(url=f"file://{place.root}/fileep/sub/../../escaped/")
    legacy.refresh_from_db()

    # The readiness check of such an endpoint: refused by the API, and by the check itself.
    response = op_api.post("/api/v1/readiness-checks/", {"endpoint": legacy.pk}, format="json")
    assert _api_refusal(response, "endpoint")
    check = readiness.run_check(ReadinessCheck.objects.create(endpoint=legacy))
    assert check.state == ReadinessCheck.State.FAILED
    assert all(s["state"] in ("failed", "skipped") for s in check.steps), check.steps
    assert any("refused" in s["message"] for s in check.steps), check.steps
    # A healthy endpoint whose readiness folder is a link to the sentinel: every probe refused.
    linked = readiness.run_check(ReadinessCheck.objects.create(endpoint=src))
    upload = next(s for s in linked.steps if s["operation"] == "upload")
    assert upload["state"] == "failed" and "symbolic link" in upload["message"], upload

    # A campaign of the legacy endpoint cannot start a run.
    campaign = Campaign.objects.create(name="corpus-legacy-run", file_count=1, file_size=1000, checksum_mode="none")
    campaign.sources.set([src])
    campaign.destinations.set([legacy])
    with pytest.raises(ValidationError, match=r"contains '\.\.'"):
        starting.check_runnable(campaign)
    assert op_api.post(f"/api/v1/campaigns/{campaign.pk}/start/").status_code == 400

    # A URL list that reaches the data beside the endpoint, slipped past the form: the run fails
    # while it prepares, before it reads a byte; the door gets nothing.
    listed = Campaign.objects.create(
        name="corpus-listed", source_listing="urls", source_urls=f"{place.source}ds_01.root", file_count=1,
        checksum_mode="none", concurrency_steps=[1],
    )  # fmt: skip
    listed.sources.set([src])
    listed.destinations.set([dst])
    run = starting.create_run(listed, trigger="command")
    snapshot = run.snapshot
    snapshot["parameters"]["source_urls"] = f"{place.source}../existing/ds_02.root\n{place.source}link/s1.dat"
    Run.objects.filter(pk=run.pk).update(snapshot=snapshot)
    assert RunDriver(run.pk).drive() == RunState.FAILED
    run.refresh_from_db()
    assert run.stop_reason.startswith("Line 1 ("), run.stop_reason  # the list's first line, refused
    snapshot["parameters"]["source_urls"] = f"{place.source}link/s1.dat"
    run2 = starting.create_run(listed, trigger="command")
    Run.objects.filter(pk=run2.pk).update(snapshot={**run2.snapshot, "parameters": snapshot["parameters"]})
    assert RunDriver(run2.pk).drive() == RunState.FAILED
    run2.refresh_from_db()
    assert "is not below any source endpoint" in run2.stop_reason, run2.stop_reason
    assert not any((place.root / "door").rglob("*")), "the door received data"


# --- the rule itself, case by case --------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "base", "strict", "below"),
    [
        ("root://h:1094//data/x", "root://h:1094//data/", False, True),
        ("root://h//data/x", "root://h:1094//data/", False, True),  # the default port is the same door
        ("root://h:1094//data//x/./y", "root://h:1094//data/", False, True),
        ("root://h:1094//data2/x", "root://h:1094//data/", False, False),
        ("root://h:1094//data/", "root://h:1094//data", True, False),
        ("root://h:1094//data/", "root://h:1094//data", False, True),
        ("ROOT://H:1094//data/x", "root://h:1094//data/", False, True),
        ("root://h:1095//data/x", "root://h:1094//data/", False, False),
        ("root://u@h:1094//data/x", "root://h:1094//data/", False, False),
        ("davs://h:1094//data/x", "root://h:1094//data/", False, False),
        ("x/y", "root://h:1094//data/", True, True),
        ("/data/x", "root://h:1094//data/", False, False),
        ("root://h:1094//data/%2525252e%2525252e/x", "root://h:1094//data/", False, False),  # too deep
        ("root://h:1094//data/x#frag", "root://h:1094//data/", False, False),
        ("root://h:1094//data/a%0ab", "root://h:1094//data/", False, False),
    ],
)
def test_the_rule_case_by_case(target, base, strict, below):
    try:
        paths.confine(target, base, strict=strict)
    except paths.PathRefused:
        assert not below
    else:
        assert below


def test_a_file_endpoint_is_refused_when_its_root_is_taken_away_or_its_folder_becomes_a_link(tmp_path, settings):
    (tmp_path / "root" / "ep").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    settings.STORAGEOPS_FILE_ROOTS = [str(tmp_path / "root")]
    url = f"file://{tmp_path}/root/ep/"
    assert paths.below_endpoint(url + "f", url) == url + "f"
    settings.STORAGEOPS_FILE_ROOTS = []
    with pytest.raises(paths.PathRefused, match="STORAGEOPS_FILE_ROOTS"):
        paths.below_endpoint(url + "f", url)
    settings.STORAGEOPS_FILE_ROOTS = [str(tmp_path / "root")]
    (tmp_path / "root" / "ep").rmdir()
    (tmp_path / "root" / "ep").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(paths.PathRefused, match="symbolic link"):
        paths.below_endpoint(url + "f", url)


def test_clean_up_refuses_a_run_folder_that_became_a_link_to_outside(tmp_path, settings):
    from campaigns.runs import cleanup

    (tmp_path / "root" / "ep" / "runs" / "run-7").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    settings.STORAGEOPS_FILE_ROOTS = [str(tmp_path / "root")]
    ep = {"url": f"file://{tmp_path}/root/ep/", "protocol": "file"}
    assert cleanup.own_folder(ep, "runs/run-7") == f"file://{tmp_path}/root/ep/runs/run-7/"
    assert cleanup.inside_prefix(f"{ep['url']}runs/run-7/f1", f"{ep['url']}runs/run-7/")
    assert not cleanup.inside_prefix(f"{ep['url']}runs/run-7/../run-8/f1", f"{ep['url']}runs/run-7/")
    (tmp_path / "root" / "ep" / "runs" / "run-7").rmdir()
    (tmp_path / "root" / "ep" / "runs" / "run-7").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert cleanup.own_folder(ep, "runs/run-7") is None  # so none of its files is a target
    # An endpoint row stored before the rule: no folder of it is clean-up's.
    assert cleanup.own_folder({"url": f"file://{tmp_path}/root/ep/a/../../x/", "protocol": "file"}, "runs") is None


@pytest.mark.parametrize("value", ["root://[::1//data/", "root://[bad/x"])
def test_a_url_that_cannot_be_read_is_refused_not_a_crash(value):
    with pytest.raises(paths.PathRefused):
        paths.check_endpoint_url(value)
    with pytest.raises(paths.PathRefused):
        paths.check_relative_path(value)
