"""Children die with whoever started them, however it dies; leftovers are found by pid file.

A parent here is a small script using devsite.processes the way the test fixtures and the
benchmarks do (ManagedProcess, XRootDServer); it is killed, and every process it started
-- including what those forked, in their own groups -- must be gone within 10 s.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from devsite.processes import (
    PidFile,
    cmdline,
    descendants,
    dying_with_parent,
    is_alive,
    start_time,
    stop_children_on_signals,
)
from devsite.services import service_account
from devsite.supervisor import SELF, Leftovers
from tests.support.processes import PYTHON, ROOT

#: stop_children_on_signals' own defaults: children are SIGKILLed after GRACE, and a main
#: thread that has not unwound EXIT_AFTER seconds later is forced out.
_DEFAULTS = inspect.signature(stop_children_on_signals).parameters
GRACE, EXIT_AFTER = _DEFAULTS["grace"].default, _DEFAULTS["exit_after"].default

#: A child that forks a grandchild into a process group of its own (as xrootd does with the
#: xrdcp of a TPC copy), both sleeping.
TREE = "import os, time\nif os.fork() == 0:\n    os.setpgid(0, 0)\ntime.sleep(300)\n"


def _parent(tmp_path: Path, body: str) -> subprocess.Popen:
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys, time
            from pathlib import Path
            sys.path.insert(0, {str(ROOT)!r})
            from devsite.processes import ManagedProcess
            from devsite.xrootd_server import XRootDServer
            tmp = Path({str(tmp_path)!r})
            """
        )
        + textwrap.dedent(body)
    )
    return subprocess.Popen([PYTHON, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)


def _tree(pid: int, expected: int, timeout: float = 30.0) -> dict[int, int]:
    """{pid: start time} of every process below ``pid``, once there are ``expected`` of them."""
    deadline = time.monotonic() + timeout
    while True:
        tree = {p: start_time(p) for p in descendants(pid)}
        if len(tree) >= expected or time.monotonic() > deadline:
            return tree
        time.sleep(0.1)


def _gone_within(tree: dict[int, int], seconds: float) -> tuple[list[int], float]:
    started = time.monotonic()
    while True:
        left = [pid for pid, started_at in tree.items() if is_alive(pid, started_at)]
        if not left or time.monotonic() - started > seconds:
            return left, time.monotonic() - started
        time.sleep(0.05)


def test_children_and_grandchildren_die_with_a_sigkilled_parent(tmp_path):
    tmp_path.chmod(0o755)
    parent = _parent(
        tmp_path,
        f"""\
        tree = ManagedProcess("tree", [sys.executable, "-c", {TREE!r}], log_dir=tmp).start()
        door = XRootDServer("pd", tmp / "data", workdir=tmp / "run").start()
        print("ready", flush=True)
        time.sleep(300)
        """,
    )
    try:
        assert parent.stdout.readline().strip() == "ready"
        # tree + its grandchild, the door (as nobody), the group guard
        tree = _tree(parent.pid, 4)
        assert len(tree) == 4, tree
        parent.kill()
        parent.wait(timeout=10)
        left, seconds = _gone_within(tree, 10)
        assert not left, f"still alive {seconds:.1f} s after the parent's SIGKILL: {left}"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_the_guard_leaves_alone_a_later_process_given_a_registered_pid():
    """A child that died on its own may never be deregistered; pids wrap (32768 here), so when
    its parent dies, the guard finds that pid leading someone else's session: seen in CI, where
    a runsite SIGKILLed by one test took another test's fresh child with it."""
    guard = subprocess.Popen(
        [PYTHON, "-I", "-S", str(ROOT / "devsite" / "groupguard.py")], stdin=subprocess.PIPE, start_new_session=True
    )
    ours, stranger = (subprocess.Popen(["/bin/sleep", "300"], start_new_session=True) for _ in range(2))
    try:
        # ``stranger`` stands for a process given a pid the guard knew with another start time.
        guard.stdin.write(
            f"add {ours.pid} {start_time(ours.pid)}\nadd {stranger.pid} {start_time(stranger.pid) - 1}\n".encode()
        )
        guard.stdin.close()  # the parent's end closes: it died
        guard.wait(timeout=10)
        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None, "a process the guard never registered was killed"
    finally:
        for proc in (ours, stranger, guard):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_the_kernel_alone_kills_the_children_of_a_sigkilled_parent(tmp_path):
    """The parent-death signal set by setpriv, with no group guard left to do it.

    setpriv execs the program in place: the pid Popen returned is the program's, and its
    command line (as pid files compare it) is the program's own.
    """
    tmp_path.chmod(0o755)
    parent = _parent(
        tmp_path,
        """\
        sleeper = ManagedProcess("sleeper", ["sleep", "300"], log_dir=tmp).start()
        door = XRootDServer("pk", tmp / "data", workdir=tmp / "run").start()
        print(sleeper.pid, door.pid, flush=True)
        time.sleep(300)
        """,
    )
    try:
        sleeper, door = (int(pid) for pid in parent.stdout.readline().split())
        guard = [pid for pid in descendants(parent.pid) if any("groupguard" in part for part in cmdline(pid))]
        assert len(guard) == 1, [(pid, cmdline(pid)) for pid in descendants(parent.pid)]
        deadline = time.monotonic() + 10
        while cmdline(sleeper) != ["sleep", "300"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cmdline(sleeper) == ["sleep", "300"]
        assert Path(cmdline(door)[0]).name == "xrootd", cmdline(door)
        children = {pid: start_time(pid) for pid in (sleeper, door)}
        os.kill(guard[0], signal.SIGKILL)
        _, _ = _gone_within({guard[0]: start_time(guard[0])}, 10)
        parent.kill()
        parent.wait(timeout=10)
        left, seconds = _gone_within(children, 10)
        assert not left, f"still alive {seconds:.1f} s after the parent's SIGKILL: {left}"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_benchmark_stuck_in_a_blocking_call_stops_its_worker_and_door_on_sigterm(tmp_path):
    """The benchmark that "ignored SIGTERM": its main thread blocked in a call that retries
    after EINTR. The benchmarks' harness stops the children from a helper thread."""
    tmp_path.chmod(0o755)
    parent = _parent(
        tmp_path,
        f"""\
        import os
        sys.path.insert(0, {str(ROOT / "benchmarks")!r})
        import harness
        harness.stop_children_on_signals()
        tree = ManagedProcess("tree", [sys.executable, "-c", {TREE!r}], log_dir=tmp).start()
        door = XRootDServer("stuck", tmp / "data", workdir=tmp / "run").start()
        print("ready", flush=True)
        read_end, write_end = os.pipe()
        try:
            os.read(read_end, 1)  # blocks forever, even through a handled signal
        finally:
            print("unwound", flush=True)
        """,
    )
    try:
        assert parent.stdout.readline().strip() == "ready"
        tree = _tree(parent.pid, 4)
        started = time.monotonic()
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        seconds = time.monotonic() - started
        left, _ = _gone_within(tree, 10)
        assert not left, left
        # It unwound by itself (its finally blocks ran) rather than being forced out at
        # exit_after: the printed word proves that whatever a busy machine added to the time.
        assert parent.stdout.read().strip() == "unwound", f"forced out after {seconds:.1f} s"
        assert seconds < GRACE + EXIT_AFTER
    finally:
        if parent.poll() is None:
            parent.kill()


def test_leftovers_of_a_crashed_runsite_are_found_and_stopped_by_group(tmp_path):
    pid_dir = tmp_path / "run"
    # A "worker" that outlived its runsite: not our child's child any more, its own group,
    # with a pool process in that group.
    worker = subprocess.Popen([sys.executable, "-c", TREE], start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        tree = _tree(worker.pid, 1)
        PidFile.record(pid_dir / "worker.pid", "worker", worker.pid)
        # A pid file whose pid now belongs to another process (another start time): left alone.
        stale = {"name": "web", "pid": stranger.pid, "started": start_time(stranger.pid) - 1, "parent": 1}
        (pid_dir / "web.pid").write_text(json.dumps({**stale, "argv": cmdline(stranger.pid)}))
        dead = subprocess.Popen(["true"])
        dead.wait()
        (pid_dir / f"{SELF}.pid").write_text(
            f'{{"name": "{SELF}", "pid": {dead.pid}, "started": 1, "argv": ["x"], "parent": 1}}\n'
        )

        leftovers = Leftovers.find(pid_dir)
        assert not leftovers.supervisor_running
        assert [r.name for r in leftovers.running] == ["worker"]
        assert [r.name for r in leftovers.gone] == ["web"]
        text = leftovers.describe()
        assert f"An earlier runsite (pid {dead.pid}) did not stop cleanly and left worker (pid {worker.pid}, 2 " in text
        leftovers.stop(grace=3.0)
        worker.wait(timeout=5)
        left, _ = _gone_within({worker.pid: None, **tree}, 5)
        assert not left
        assert stranger.poll() is None, "a process that merely reuses a recorded pid is not ours"
        assert not list(pid_dir.glob("*.pid"))
    finally:
        for proc in (worker, stranger):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_a_child_recorded_as_soon_as_it_is_started_is_recognised_as_running(tmp_path):
    """Services and the supervisor record a child straight after Popen, while setpriv is still
    exec'ing the program and /proc shows an empty command line (three reads of four here): the
    record holds the argv it was started with, or the next start calls it gone and leaves it
    running (a redis an earlier launcher left, seen in CI)."""
    account = service_account()
    for attempt in range(40):
        child = subprocess.Popen(
            dying_with_parent(["/bin/sleep", "300"], account=account),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            PidFile.record(tmp_path / "child.pid", "child", child.pid, child.args)
            # Found later, as the next start finds it: once the program runs.
            deadline = time.monotonic() + 30
            while cmdline(child.pid) != ["/bin/sleep", "300"]:
                assert time.monotonic() < deadline, cmdline(child.pid)
                time.sleep(0.01)
            leftovers = Leftovers.find(tmp_path)
            assert [r.name for r in leftovers.running] == ["child"], (attempt, leftovers)
            assert leftovers.running[0].argv == ["/bin/sleep", "300"]
        finally:
            child.kill()
            child.wait()
    assert [r.name for r in Leftovers.find(tmp_path).gone] == ["child"], "dead, it is gone"


def test_runsite_refuses_a_port_held_by_something_else(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(CommandError) as refused:
            call_command("runsite", bind=f"127.0.0.1:{port}", no_demo=True)
    message = str(refused.value)
    assert f"port {port} (127.0.0.1:{port}) is in use by pid {os.getpid()} (" in message
    assert "--bind" in message
    assert not (tmp_path / "run" / f"{SELF}.pid").exists()


def test_runsite_refuses_to_start_twice_on_one_var_dir(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        # Recorded once it runs its own program: until its exec the child shows our command line,
        # and a record of that no longer matches it (a stranger that took the pid, for runsite).
        deadline = time.monotonic() + 30
        while "time.sleep(300)" not in " ".join(cmdline(other.pid)):
            assert time.monotonic() < deadline, cmdline(other.pid)
            time.sleep(0.01)
        PidFile.record(tmp_path / "run" / f"{SELF}.pid", SELF, other.pid)
        with pytest.raises(CommandError, match=rf"runsite is already running .* as pid {other.pid}; stop it first"):
            call_command("runsite", bind="127.0.0.1:1", no_demo=True)
        assert is_alive(other.pid)
    finally:
        other.kill()
        other.wait()


def test_children_are_vforked_so_no_library_fork_handler_runs_in_them(tmp_path):
    """A door (switched to the server account) and a managed process, started by a parent that
    has loaded gfal2 (and XrdCl with it), are started by vfork: on the fork() path the libraries'
    pthread_atfork handlers ran in the child before exec, and a child died there of SIGSEGV
    about once a stressed suite. strace shows which call made each child."""
    tmp_path.chmod(0o755)
    script = tmp_path / "starts.py"
    script.write_text(
        textwrap.dedent(
            f"""\
            import sys
            from pathlib import Path
            sys.path.insert(0, {str(ROOT)!r})
            import gfal2
            gfal2.creat_context()
            from devsite.processes import ManagedProcess
            from devsite.xrootd_server import XRootDServer
            tmp = Path({str(tmp_path)!r})
            door = XRootDServer("vf", tmp / "data", workdir=tmp / "run").start()
            ManagedProcess("short", ["true"], log_dir=tmp).start().proc.wait()
            door.stop()
            """
        )
    )
    trace = tmp_path / "trace"
    argv = ["strace", "-f", "-qq", "-e", "trace=fork,vfork,clone,clone3", "-o", str(trace), "/usr/bin/python3"]
    result = subprocess.run([*argv, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    calls = [line for line in trace.read_text().splitlines() if "CLONE_THREAD" not in line and "resumed" not in line]
    children = [line for line in calls if re.search(r"\b(v?fork|clone3?)\(", line)]
    # the group guard, the door (setpriv → xrootd), "true"; xrootd's own forks are its business
    ours = [line for line in children if line.split()[0] == calls[0].split()[0]]
    assert len(ours) >= 3, calls
    # A call another thread interrupts is written in two lines, "vfork( <unfinished ...>" and
    # its "resumed" rest (left out above): the call's name is in the first, not "vfork()".
    assert all(re.search(r"\bvfork\(", line) or "CLONE_VFORK" in line for line in ours), ours


def _blocking_stop_signals() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_launcher_started_with_its_stop_signals_blocked_still_stops_on_them(tmp_path, sig):
    """A CI runner blocked SIGTERM for everything below it: the launcher, and every process it
    started (which inherit its mask), never saw the signal that was to stop them. The launcher
    takes its stop signals back first thing, so what it starts can be stopped too."""
    env = {**os.environ, "STORAGEOPS_VAR_DIR": str(tmp_path / "var")}  # DATABASE_URL set: no servers of its own
    launcher = subprocess.Popen(
        [PYTHON, "-m", "devsite.launch", "--", PYTHON, "-c", "print('up', flush=True); import time; time.sleep(300)"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, preexec_fn=_blocking_stop_signals,
    )  # fmt: skip
    try:
        assert launcher.stdout.readline().strip() == "up"
        child = _tree(launcher.pid, 1)
        assert child, "the launcher's command did not start"
        blocked = int(re.search(r"SigBlk:\s*(\w+)", Path(f"/proc/{next(iter(child))}/status").read_text())[1], 16)
        assert not blocked & (1 << (sig - 1)), "the command inherited the blocked mask"
        launcher.send_signal(sig)
        assert launcher.wait(timeout=20) == 128 + sig
        left, _ = _gone_within(child, 10)
        assert not left, left
    finally:
        if launcher.poll() is None:
            launcher.kill()
