"""The site's own PostgreSQL and Redis (devsite.services, devsite.launch): started under a var
folder on free loopback ports, answering, stopped with nothing left; and after a crash, found
and cleared by the next start, the cluster and its data kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
import redis

from devsite.processes import descendants, dying_with_parent, is_alive, session_members, start_time
from devsite.services import ServiceDirs, Services, service_account
from tests.support.processes import PYTHON, ROOT, ManagedProcess

#: The launcher's child in the crash test: prints the URLs it was given, then waits to be killed.
_CHILD = "import json, os, time; print(json.dumps({k: os.environ[k] for k in ('DATABASE_URL', 'CELERY_BROKER_URL')}), flush=True); time.sleep(600)"  # noqa: E501


def _launcher_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    return {**env, "STORAGEOPS_VAR_DIR": str(var_dir)}


def _tree(pids: list[int]) -> dict[int, int]:
    """Every process of these servers (a postmaster's backends and helpers), with its start time."""
    found = {pid for pid in pids for pid in (pid, *descendants(pid), *session_members(pid))}
    return {pid: start_time(pid) for pid in found if start_time(pid) is not None}


def _wait_gone(tree: dict[int, int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [pid for pid, started in tree.items() if is_alive(pid, started)]
        if not left:
            return []
        time.sleep(0.05)
    return left


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(pid)


def _answers(urls: dict[str, str]) -> None:
    with psycopg.connect(urls["DATABASE_URL"], connect_timeout=5) as conn:
        assert conn.execute("SELECT current_database(), current_user").fetchone() == ("storageops", "storageops")
    assert redis.Redis.from_url(urls["CELERY_BROKER_URL"], socket_timeout=5).ping()


def test_own_servers_answer_under_var_and_stop_leaving_nothing(var_dir):
    var = var_dir
    services = Services(ServiceDirs(var, "t"), durable=False, say=lambda text: None)
    services.start()
    try:
        urls = services.env()
        _answers(urls)
        assert {p.port for p in services.running} == {int(u.rsplit(":", 1)[1].split("/")[0]) for u in urls.values()}
        for url in urls.values():
            assert "@127.0.0.1:" in url
        # Without the password neither lets anyone in: another user of the machine reaches a loopback port.
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(urls["DATABASE_URL"].replace(services.postgres.password, "wrong"), connect_timeout=5)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(urls["CELERY_BROKER_URL"].replace(services.redis.password, "wrong")).ping()
        pids = services.pids()
        account = service_account()
        for pid in pids:
            assert _uid(pid) == (account.pw_uid if account else os.getuid())
        # The unix socket under var, not the distribution's /var/run/postgresql.
        assert (var / "services/t/postgres" / f".s.PGSQL.{services.postgres.port}").is_socket()
        assert not Path(f"/var/run/postgresql/.s.PGSQL.{services.postgres.port}").exists()
        records = {p.stem: json.loads(p.read_text())["pid"] for p in (var / "run/t").glob("*.pid")}
        assert records == {"postgres": pids[0], "redis": pids[1]}
        tree = _tree(pids)
        assert len(tree) >= 5, tree  # a postmaster, its helpers, redis-server
    finally:
        services.stop()
    assert _wait_gone(tree) == []
    assert not list((var / "run/t").glob("*.pid"))
    assert not (var / "services/t/postgres/postmaster.pid").exists()


def test_a_crashed_launcher_is_cleared_and_its_cluster_reused(var_dir, tmp_path):
    var = var_dir
    argv = [PYTHON, "-m", "devsite.launch", "--set", "t", "--", PYTHON, "-c", _CHILD]
    first = ManagedProcess("launcher-1", argv, _launcher_env(var), tmp_path, cwd=ROOT).start()
    try:
        first.wait_for_log("DATABASE_URL", timeout=120)
        urls = json.loads(next(line for line in first.log_text().splitlines() if line.startswith("{")))
        _answers(urls)
        with psycopg.connect(urls["DATABASE_URL"]) as conn:
            conn.execute("CREATE TABLE kept (note text)")
            conn.execute("INSERT INTO kept VALUES ('written before the crash')")
        records = {p.stem: json.loads(p.read_text()) for p in (var / "run/t").glob("*.pid")}
        assert set(records) == {"launcher", "postgres", "redis"}
        assert records["launcher"]["pid"] == first.pid
        tree = _tree([first.pid])
        assert {records["postgres"]["pid"], records["redis"]["pid"]} <= set(tree)

        first.kill()  # SIGKILL: no chance to stop anything
        assert _wait_gone(tree) == [], "the servers and the child die with their launcher"
    finally:
        first.stop()
    lock = var / "services/t/postgres/postmaster.pid"
    assert lock.exists(), "a SIGKILLed postmaster leaves its lock file"

    # Its pid reused by a live process of the servers' own user: PostgreSQL alone would refuse
    # to start ("lock file already exists"), as it cannot tell that process is no postmaster.
    account = service_account()
    squatter = subprocess.Popen(dying_with_parent(["sleep", "120"], account=account))
    try:
        lines = lock.read_text().split("\n")
        lock.write_text("\n".join([str(squatter.pid), *lines[1:]]))
        second = ManagedProcess("launcher-2", argv, _launcher_env(var), tmp_path, cwd=ROOT).start()
        try:
            second.wait_for_log("DATABASE_URL", timeout=120)
            log = second.log_text()
            assert "An earlier launcher did not stop cleanly; its postgres" in log, log
            assert f"Removed the postmaster.pid of a PostgreSQL that is gone (pid {squatter.pid}" in log, log
            urls = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
            with psycopg.connect(urls["DATABASE_URL"]) as conn:
                assert conn.execute("SELECT note FROM kept").fetchall() == [("written before the crash",)]
            assert is_alive(squatter.pid), "the process that holds the reused pid is left alone"
            tree = _tree([second.pid])
            second.proc.send_signal(signal.SIGTERM)  # passed on to the child, then the servers stop
            assert second.proc.wait(timeout=60) == 128 + signal.SIGTERM
            assert _wait_gone(tree) == []
            assert "Stopped the own PostgreSQL/Redis" in second.log_text()
        finally:
            second.stop()
    finally:
        squatter.kill()
        squatter.wait()
    assert not lock.exists()
    assert {p.name for p in (var / "run/t").glob("*.pid")} == set()


def test_servers_an_earlier_launcher_left_running_are_stopped_by_the_next(var_dir):
    """Its launcher gone without taking them along (they were another process's children here):
    the next start stops them by their recorded pids, and starts afresh on the same cluster."""
    dirs = ServiceDirs(var_dir, "t")
    earlier = Services(dirs, durable=False, say=lambda text: None)
    earlier.start()
    try:
        left = _tree(earlier.pids())
        said: list[str] = []
        later = Services(dirs, durable=False, say=said.append)
        later.start()
        try:
            assert _wait_gone(left) == []
            assert any("left postgres running" in text for text in said), said
            assert any("left redis running" in text for text in said), said
            _answers(later.env())
        finally:
            later.stop()
    finally:
        earlier.stop()  # reaps what the later start stopped


def test_two_launchers_with_their_own_var_folders_run_side_by_side(tmp_path, var_dir):
    """A second site beside the first (another STORAGEOPS_VAR_DIR): its own servers, and stopping
    it leaves the first's answering."""
    launchers, urls = [], []
    for number in (1, 2):
        var = var_dir.parent / f"var{number}"
        argv = [PYTHON, "-m", "devsite.launch", "--", PYTHON, "-c", _CHILD]
        launcher = ManagedProcess(f"launcher-{number}", argv, _launcher_env(var), tmp_path, cwd=ROOT).start()
        launchers.append(launcher)
    try:
        for launcher in launchers:
            launcher.wait_for_log("DATABASE_URL", timeout=120)
            urls.append(json.loads(next(line for line in launcher.log_text().splitlines() if line.startswith("{"))))
        assert urls[0]["DATABASE_URL"] != urls[1]["DATABASE_URL"]
        assert urls[0]["CELERY_BROKER_URL"] != urls[1]["CELERY_BROKER_URL"]
        # A second launcher on the first's var folder is refused, naming the first.
        again = subprocess.run([PYTHON, "-m", "devsite.launch", "--", "true"], cwd=ROOT, capture_output=True,
                               text=True, env=_launcher_env(var_dir.parent / "var1"), timeout=60)  # fmt: skip
        assert again.returncode == 1
        assert f"already running with this var folder ({var_dir.parent / 'var1'}) as pid {launchers[0].pid}" in (
            again.stderr
        )
        second = _tree([launchers[1].pid])
        launchers[1].proc.send_signal(signal.SIGINT)
        assert launchers[1].proc.wait(timeout=60) == 128 + signal.SIGINT
        assert _wait_gone(second) == []
        _answers(urls[0])
        assert launchers[0].returncode is None
    finally:
        for launcher in launchers:
            launcher.stop()


_HOLDER = (
    "import json, sys, time; from pathlib import Path; from devsite.services import ServiceDirs, Services, claim;"
    "dirs = ServiceDirs(Path(sys.argv[1]), 'soak'); claim(dirs);"
    "s = Services(dirs, durable=False, say=print); s.start();"
    "print(json.dumps(s.env()), flush=True); time.sleep(600)"
)


def test_servers_held_by_a_live_process_other_than_the_launcher_are_never_taken_for_leftovers(tmp_path, var_dir):
    """A soak holds its own set of servers; a `devsite.launch --set soak` to read its database
    stopped them as a crashed launcher's leftovers, mid-soak. Claimed, they are refused to it."""
    holder = ManagedProcess("holder", [PYTHON, "-c", _HOLDER, str(var_dir)], _launcher_env(var_dir), tmp_path, cwd=ROOT)
    holder.start()
    try:
        holder.wait_for_log("DATABASE_URL", timeout=120)
        urls = json.loads(next(line for line in holder.log_text().splitlines() if line.startswith("{")))
        again = subprocess.run([PYTHON, "-m", "devsite.launch", "--set", "soak", "--", "true"], cwd=ROOT,
                               capture_output=True, text=True, env=_launcher_env(var_dir), timeout=60)  # fmt: skip
        assert again.returncode == 1, again.stderr
        assert f"already running with this var folder ({var_dir}) as pid {holder.pid}" in again.stderr
        assert "left postgres running" not in again.stderr
        _answers(urls)
    finally:
        holder.stop()
