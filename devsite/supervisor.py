"""A set of child processes watched together and stopped together (make run).

A child that dies is restarted, with back-off, while the others carry on: a demo door killed
to try the broken-endpoint check comes back as a restarted daemon would, and the collector
logs its restart. The set stops only when its owner says so (``stop_all``).

With a pid directory (var/run/), every child is recorded in ``<name>.pid`` while it runs,
so that a later start can find what a crashed supervisor left (``Leftovers``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from devsite.processes import (
    ManagedProcess,
    PidFile,
    describe,
    is_alive,
    parent_pid,
    release_group,
    session_members,
    signal_session,
    start_time,
    stop_processes,
)

log = logging.getLogger(__name__)

#: The supervisor's own pid file in the pid directory; the children's are ``<name>.pid``.
SELF = "runsite"

#: The first restart waits FIRST_BACKOFF s, each further one twice as long, up to MAX_BACKOFF:
#: a child that dies at once every time (a broken config) is tried again twice a minute, not
#: in a loop that fills the terminal.
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
#: A child that stayed up this long before dying starts the back-off afresh.
STABLE_AFTER = 60.0


def exit_text(returncode: int) -> str:
    """``exit code 1`` or ``killed by SIGKILL`` from a Popen return code."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def backoff(failures: int) -> float:
    """Seconds before the restart that follows ``failures`` quick deaths in a row (1 for the first)."""
    return min(FIRST_BACKOFF * 2 ** max(failures - 1, 0), MAX_BACKOFF)


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen
    #: Starts the child again and returns its new process; None: never restarted.
    restart: Callable[[], subprocess.Popen] | None = None
    started: float = field(default_factory=time.monotonic)
    #: Deaths in a row, each after less than STABLE_AFTER s up: what the back-off grows with.
    failures: int = 0
    restarts: int = 0
    #: When a restart is due (monotonic), while the child is down.
    due: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()


class Supervisor:
    def __init__(
        self, pid_dir: Path | None = None, say: Callable[[str], None] | None = None, log_dir: Path | None = None
    ) -> None:
        self.children: list[_Child] = []
        self._managed: dict[str, ManagedProcess] = {}
        self.pid_dir = pid_dir
        self.say = say or (lambda text: None)
        #: Where the children's output goes (<name>.log); None: our own stdout, as make run shows it.
        self.log_dir = log_dir

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None):
        """Start a child and restart it whenever it dies."""

        def launch() -> subprocess.Popen:
            old = self._managed.pop(name, None)
            if old is not None:
                old.stop()  # dead already: closes and forgets it
            child = self._managed[name] = ManagedProcess(name, argv, env, self.log_dir, cwd=cwd).start()
            log.info("started %s (pid %d)", name, child.pid)
            return child.proc

        self.watch(name, launch(), restart=launch)
        return self._managed[name]

    def watch(self, name: str, proc: subprocess.Popen, restart: Callable[[], subprocess.Popen] | None = None) -> None:
        """Watch and stop a child started elsewhere (an XRootD door); record its pid file.

        ``restart`` starts it again (in this thread: children die with the thread that
        started them) and returns the new process; without one, a death is only reported."""
        self.children.append(_Child(name, proc, restart))
        self._record(name, proc)

    def _record(self, name: str, proc: subprocess.Popen) -> None:
        if self.pid_dir is not None:
            PidFile.record(self.pid_dir / f"{name}.pid", name, proc.pid, proc.args)

    def tend(self, now: float | None = None) -> None:
        """Notice the children that died and restart those whose back-off is over; call often.

        What it does is said through ``say``: who died and how, when it comes back, its new pid."""
        for child in self.children:
            # Read afresh for each child: a restart takes a while (a door waits until it answers).
            at = time.monotonic() if now is None else now
            if child.due is None and child.returncode is not None:
                self._died(child, at)
            elif child.due is not None and at >= child.due:
                self._restart(child)

    def _died(self, child: _Child, now: float) -> None:
        up = now - child.started
        # What the dead child left in its session (an xrdcp a door forked for a TPC copy, a
        # pool process of a killed master) goes with it, and the group guard forgets it.
        signal_session(child.pid, signal.SIGKILL)
        release_group(child.pid)
        if self.pid_dir is not None:
            (self.pid_dir / f"{child.name}.pid").unlink(missing_ok=True)
        how = f"{child.name} (pid {child.pid}) exited ({exit_text(child.returncode)}) after {up:.0f} s up"
        if child.restart is None:
            self.say(f"{how}; not restarted.")
            child.due = float("inf")
            return
        child.failures = 1 if up >= STABLE_AFTER else child.failures + 1
        wait = backoff(child.failures)
        child.due = now + wait
        self.say(f"{how}; restarting it in {wait:.0f} s.")

    def _restart(self, child: _Child) -> None:
        try:
            proc = child.restart()
        except (OSError, RuntimeError) as exc:  # a failed start (XRootDServerError, no port) is retried
            child.failures += 1
            wait = backoff(child.failures)
            child.due = time.monotonic() + wait
            self.say(f"{child.name} did not start again ({exc}); trying again in {wait:.0f} s.")
            return
        child.proc, child.due, child.started = proc, None, time.monotonic()
        child.restarts += 1
        self._record(child.name, proc)
        self.say(f"{child.name} restarted (pid {proc.pid}, restart {child.restarts}).")

    def stop_all(self, grace: float = 5.0, hurry: Callable[[], bool] | None = None) -> float:
        """Stop every child at once (SIGTERM, SIGKILL after ``grace`` s); returns the seconds."""
        # SIGTERM to each child alone: gunicorn's master and Celery's stop their own workers (a
        # pool process signalled directly dies mid-task and is replaced); SIGKILL for the rest.
        seconds = stop_processes(
            [(c.name, c.proc) for c in reversed(self.children)],
            grace=grace,
            say=self.say,
            hurry=hurry,
            leader_only=True,
        )
        if self.pid_dir is not None:
            for child in self.children:
                (self.pid_dir / f"{child.name}.pid").unlink(missing_ok=True)
        for managed in self._managed.values():
            managed.stop()  # stopped already: closes and forgets
        self.children.clear()
        self._managed.clear()
        return seconds


# -- what an earlier supervisor left ---------------------------------------------------------------
@dataclass
class Leftovers:
    """The pid files found in a pid directory, sorted by what their processes are now."""

    pid_dir: Path
    #: The name of the supervisor's own pid file (runsite's; devsite.services' launcher has its own folder).
    supervisor_name: str = SELF
    supervisor: PidFile | None = None
    supervisor_running: bool = False
    running: list[PidFile] = field(default_factory=list)  # children of ours still alive
    gone: list[PidFile] = field(default_factory=list)  # dead, or the pid is another process now

    @classmethod
    def find(cls, pid_dir: Path, supervisor_name: str = SELF) -> Leftovers:
        found = cls(pid_dir, supervisor_name)
        for path in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
            record = PidFile.read(path)
            if record is None:
                path.unlink(missing_ok=True)
                continue
            if path.stem == supervisor_name:
                found.supervisor = record
                found.supervisor_running = record.pid != os.getpid() and record.is_running()
            elif record.is_running():
                found.running.append(record)
            else:
                found.gone.append(record)
        return found

    def describe(self) -> str:
        """One paragraph for the person starting `make run`."""
        earlier = f"An earlier runsite (pid {self.supervisor.pid})" if self.supervisor else "An earlier runsite"
        if self.running:
            names = ", ".join(
                f"{r.name} (pid {r.pid}, {len(session_members(r.pid)) or 1} processes)" for r in self.running
            )
            return f"{earlier} did not stop cleanly and left {names} running; stopping them."
        names = ", ".join(r.name for r in self.gone)
        return f"{earlier} did not stop cleanly; its {names or 'children'} are gone already."

    def stop(self, grace: float = 5.0, say: Callable[[str], None] | None = None) -> float:
        """Stop the leftover children by process group (they lead their own) and clear the files."""
        seconds = stop_processes([(r.name, _Orphan(r.pid)) for r in self.running], grace=grace, say=say)
        self.clear()
        return seconds

    def clear(self) -> None:
        for record in [*self.running, *self.gone, *([self.supervisor] if self.supervisor else [])]:
            (self.pid_dir / f"{record.name}.pid").unlink(missing_ok=True)


class _Orphan:
    """Enough of Popen for stop_processes, for a process that is not our child (no reaping)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._started = start_time(pid)

    def poll(self) -> int | None:
        return None if is_alive(self.pid, self._started) else 0


# -- who holds a port ------------------------------------------------------------------------------
def port_in_use(host: str, port: int) -> bool:
    """Whether a server could not bind ``host:port`` now (as gunicorn does: SO_REUSEADDR)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def port_listeners(port: int) -> list[int]:
    """Pids of the processes holding a socket that listens on ``port`` (from /proc; may be
    empty when they belong to another user and we are not root, or live in another netns)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    if not inodes:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        pids.append(int(entry.name))
                        break
    return sorted(pids)


def port_owner_text(port: int) -> str:
    """Who listens on ``port``, for a message: the topmost such processes (a server's master,
    not each of its workers, which share its socket)."""
    pids = port_listeners(port)
    if not pids:
        return "a process this user cannot see"
    top = [pid for pid in pids if parent_pid(pid) not in pids]
    text = "; ".join(describe(pid) for pid in top[:3])
    if len(top) > 3:
        text += f" and {len(top) - 3} more"
    if len(pids) > len(top):
        text += f" (with {len(pids) - len(top)} of its children)"
    return text
