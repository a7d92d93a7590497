"""Child processes started by StorageOps itself (make run), its tests and its benchmarks.

Each child gets a session of its own, so that it and whatever it forks (gunicorn's and
Celery's pools, xrootd's TPC xrdcp, which xrootd puts in a process group of its own) are
found and signalled together: the session of *our* child's pid, never processes found by
name, which other sessions on the machine may share.

Nothing is left behind when the parent dies, however it dies:

* each child is started with a parent-death signal (Linux ``PR_SET_PDEATHSIG``), so the
  kernel kills it with its parent, SIGKILL included. util-linux's ``setpriv`` sets it, after
  any switch of user it is asked for (a change of credentials clears the signal), and execs
  the program (``dying_with_parent``); neither xrootd nor taskset is set-user-ID (an exec of
  one would clear it too). With neither a ``preexec_fn`` nor Popen's own ``user=``/``group=``,
  CPython starts the child with vfork, so nothing runs in it between fork and exec: not Python
  code, and not the ``pthread_atfork`` handlers of the libraries loaded here (XrdCl's, through
  gfal2). On the fork() path a child died of SIGSEGV before exec about once a stressed suite,
  its fatal-error report naming the parent's gfal2 threads. The signal follows the *thread*
  that started the child: start children from a thread that lives as long as they should;
* a group guard (devsite/groupguard.py), one small process per parent, kills every process
  group of the children's sessions when the parent is gone: the grandchildren too;
* a parent stopped by a signal it can handle stops its children by session (Supervisor,
  ``stop_processes``, ``stop_children_on_signals``).

Pid files (``PidFile``) let the next `make run` find and stop what a crashed one left.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (thread) dies."""
    return _prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def take_stop_signals() -> None:
    """Receive SIGINT, SIGTERM and SIGHUP even when this process was started with them blocked.

    A signal mask is inherited through fork and exec: a CI runner or service manager that blocks
    them hands that on to every process below it, and a blocked signal is never delivered, not
    to a handler and not to its default action. The launcher, runsite and the benchmarks, which
    are stopped by these signals and stop their children with them, then ran on until killed
    (a launcher sent SIGTERM, and every process it started, which inherit its mask). Call first
    thing in a process that is stopped by signal: its children inherit the unblocked mask.
    Dispositions are left alone (`nohup` ignores SIGHUP on purpose)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


_SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"


def dying_with_parent(
    argv: list[str], sig: signal.Signals = signal.SIGKILL, account: pwd.struct_passwd | None = None
) -> list[str]:
    """``argv`` run through ``setpriv``: the program dies with our process, as ``account``
    (its uid, its primary group, no supplementary groups) when one is given.

    setpriv switches user, sets the signal and execs the program, keeping the pid, so what
    Popen returns is the program's process; its command line is setpriv's only until that exec
    (``program_argv`` sees through it). Do not pass Popen ``user=``/``group=`` as well: they
    turn off vfork (see the module's docstring).
    """
    switch = [f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups"] if account is not None else []
    return [_SETPRIV, *switch, "--pdeathsig", sig.name.removeprefix("SIG"), "--", *argv]


def program_argv(argv: list[str]) -> list[str]:
    """The program's own argv, without a ``dying_with_parent`` prefix not yet exec'd away."""
    if argv and Path(argv[0]).name == "setpriv" and "--" in argv:
        options = argv[1 : argv.index("--")]
        if "--pdeathsig" in options:
            return argv[argv.index("--") + 1 :]
    return argv


# -- the group guard ----------------------------------------------------------------------------
class _GroupGuard:
    """This process's guard (devsite/groupguard.py), started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._fd: int | None = None
        self.process: subprocess.Popen | None = None

    def _ensure(self) -> int | None:
        if self._fd is not None and self._owner == os.getpid():
            return self._fd
        read_end, write_end = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).with_name("groupguard.py"))],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
        self._fd, self._owner = write_end, os.getpid()
        return write_end

    def _send(self, line: str, start: bool = True) -> None:
        with self._lock:
            if not start and (self._fd is None or self._owner != os.getpid()):
                return
            fd = self._ensure()
            if fd is None:
                return
            with contextlib.suppress(OSError):
                os.write(fd, line.encode())

    def add(self, pgid: int) -> None:
        # With its start time: the guard must not take a later process given the same pid for it.
        # A child already gone has nothing left to guard, and its pid may soon be someone else's.
        started = start_time(pgid)
        if started is not None:
            self._send(f"add {pgid} {started}\n")

    def remove(self, pgid: int) -> None:
        self._send(f"del {pgid}\n", start=False)

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's pipe end is not ours to hold open."""
        if self._fd is not None and self._owner != os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = self._owner = None
            self.process = None
            self._lock = threading.Lock()


_guard = _GroupGuard()


def _after_fork_in_child() -> None:
    _guard.forget_after_fork()
    with contextlib.suppress(NameError):
        _live.clear()  # the parent's children are the parent's to stop


os.register_at_fork(after_in_child=_after_fork_in_child)


def guard_group(sid: int) -> None:
    """Have the group guard SIGKILL every process of session ``sid`` if this process dies first.

    ``sid`` is the pid of a child started with ``start_new_session=True``.
    """
    _guard.add(sid)


def release_group(sid: int) -> None:
    _guard.remove(sid)


# -- /proc ---------------------------------------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3… of /proc/<pid>/stat (after the parenthesised command name)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot: with the pid, an identity."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_alive(pid: int, started: int | None = None) -> bool:
    """The process exists, is not a zombie, and (if given) started at ``started``."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or int(fields[19]) == started


def parent_pid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return program_argv([part.decode(errors="replace") for part in raw.split(b"\0")[:-1]])


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``, from /proc."""
    return [pid for pid, fields in _live_stats() if int(fields[2]) == pgid]


def session_members(sid: int) -> list[int]:
    """Live processes of session ``sid``, from /proc, whatever their process group."""
    return [pid for pid, fields in _live_stats() if int(fields[3]) == sid]


def _live_stats():
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] not in ("Z", "X"):
                yield int(entry.name), fields


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, their children, …), whatever their session."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields and fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def describe(pid: int) -> str:
    """``pid 123 (python -m gunicorn …)`` for messages."""
    argv = cmdline(pid)
    text = " ".join(argv)
    return f"pid {pid}" + (f" ({text[:120]}{'…' if len(text) > 120 else ''})" if text else "")


def peak_rss_bytes(pid: int) -> int:
    """The peak resident set size (VmHWM) of a live process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


# -- pid files -----------------------------------------------------------------------------------
#: How long an exec may keep a process's command line empty before it counts as another program's.
EXEC_SECONDS = 2.0


@dataclass
class PidFile:
    """What a pid file under var/ records about one child: enough to recognise it later.

    A pid alone may have been reused by an unrelated process since; the pid with the
    process's start time may not, and the command line guards against a stale file.
    """

    name: str
    pid: int
    started: int
    argv: list[str]
    parent: int

    @classmethod
    def record(cls, path: Path, name: str, pid: int, argv: Sequence[str] | None = None) -> PidFile:
        """``argv``: what a child was started with. Its /proc command line cannot be read for it
        right after Popen: that is setpriv's until its exec, and empty while the exec is under way
        (in three reads of four here), and a record holding that would call the child gone."""
        seen = program_argv(list(argv)) if argv is not None else cmdline(pid)
        record = cls(name, pid, start_time(pid) or 0, seen, os.getpid())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(record)) + "\n")
        tmp.replace(path)
        return record

    @classmethod
    def read(cls, path: Path) -> PidFile | None:
        try:
            data = json.loads(path.read_text())
            return cls(data["name"], int(data["pid"]), int(data["started"]), list(data["argv"]), int(data["parent"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def is_running(self) -> bool:
        """The very process this file describes is still alive (not another with its pid).

        While a child goes from setpriv to its program, the exec leaves /proc's command line
        empty for a moment: read once then, a running child was called gone (about once in 200
        starts on a busy machine) and left running by the next start. An empty read of the very
        process (its pid and start time) is read again until EXEC_SECONDS have passed."""
        deadline = time.monotonic() + EXEC_SECONDS
        while is_alive(self.pid, self.started):
            seen = cmdline(self.pid)
            if seen or time.monotonic() >= deadline:
                return seen == self.argv
            time.sleep(0.005)
        return False


# -- stopping ------------------------------------------------------------------------------------
def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_session(sid: int, sig: int) -> None:
    """``sig`` to every process group of session ``sid`` (a group's id is not reused while it
    has a member, unlike a bare pid)."""
    fields_by_pid = dict(_live_stats())
    groups = {int(fields[2]) for fields in fields_by_pid.values() if int(fields[3]) == sid}
    for pgid in groups | {sid}:
        signal_group(pgid, sig)


def stop_processes(
    procs: Iterable[tuple[str, subprocess.Popen]],
    grace: float = 5.0,
    say: Callable[[str], None] | None = None,
    patience: float = 2.0,
    hurry: Callable[[], bool] | None = None,
    leader_only: bool = False,
) -> float:
    """Stop children that lead sessions of their own, all at once; returns the seconds.

    SIGTERM to each child's process group (or, ``leader_only``, to the child alone, for a
    master that stops its pool itself); every ``patience`` seconds, ``say`` what is still
    awaited; SIGKILL to the sessions still there after ``grace`` seconds (or as soon as
    ``hurry()``). What is left of each session once its leader is gone (a pool process, an
    xrdcp pulling a TPC copy for xrootd) is killed too.
    """
    procs = [(name, proc) for name, proc in procs]
    started = time.monotonic()
    for _, proc in procs:
        if proc.poll() is None:
            if leader_only:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            else:
                signal_group(proc.pid, signal.SIGTERM)
    next_report = started + patience
    killed = False
    while True:
        waiting = [(name, proc) for name, proc in procs if proc.poll() is None]
        if not waiting:
            break
        now = time.monotonic()
        if not killed and (now - started >= grace or (hurry is not None and hurry())):
            if say:
                names = ", ".join(f"{name} (pid {proc.pid})" for name, proc in waiting)
                say(f"Still not stopped after {now - started:.1f} s: killing {names}.")
            for _, proc in waiting:
                signal_session(proc.pid, signal.SIGKILL)
            killed = True
            next_report = now + patience
        elif now >= next_report:
            if say:
                names = ", ".join(
                    f"{name} (pid {proc.pid}, {len(session_members(proc.pid))} processes in its session)"
                    for name, proc in waiting
                )
                say(f"Stopping for {now - started:.0f} s, waiting for {names}.")
            next_report = now + patience
        time.sleep(0.05)
    for _, proc in procs:
        signal_session(proc.pid, signal.SIGKILL)
        release_group(proc.pid)
    return time.monotonic() - started


_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


def live_processes() -> list[ManagedProcess]:
    with _live_lock:
        return list(_live)


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        cwd: Path | str | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log_path = (log_dir / f"{name}.log") if log_dir else None
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> ManagedProcess:
        """Start; output goes to the log file when one was given, else to our own stdout.

        The child dies with this process (see the module's docstring), so start it from a
        thread that lives as long as the child should.
        """
        if self.log_path:
            self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            dying_with_parent(self.argv),
            env=self.env,
            cwd=self.cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
            start_new_session=True,
        )
        guard_group(self.proc.pid)
        with _live_lock:
            _live.add(self)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return
            if self.returncode is not None:
                raise RuntimeError(f"{self.name} exited with {self.returncode}:\n{self.log_text()[-3000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: {needle!r} not seen in {timeout}s:\n{self.log_text()[-3000:]}")

    def group_pids(self) -> list[int]:
        """Our child and every process of its group (e.g. a prefork pool), from /proc."""
        return group_members(self.proc.pid) if self.proc else []

    def kill(self) -> None:
        """SIGKILL the whole session at once: a crash, with no chance to clean up."""
        if self.proc and self.proc.poll() is None:
            signal_session(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 20.0, say: Callable[[str], None] | None = None) -> None:
        """SIGTERM the group, SIGKILL the session after ``timeout`` s; the session's rest goes too."""
        if not self.proc:
            return
        stop_processes([(self.name, self.proc)], grace=timeout, say=say)
        self._forget()

    @staticmethod
    def stop_all(processes: Iterable[ManagedProcess], timeout: float = 20.0) -> None:
        """Stop several at once, under one ``timeout`` for all: Celery workers in a warm shutdown
        each wait out their grace, so stopped one after the other four took 80 s."""
        running = [process for process in processes if process.proc]
        stop_processes([(process.name, process.proc) for process in running], grace=timeout)
        for process in running:
            process._forget()

    def _forget(self) -> None:
        if self._log:
            self._log.close()
            self._log = None
        with _live_lock:
            _live.discard(self)


def _stop_live_at_exit() -> None:
    """A normal interpreter exit stops what is still running (fixtures normally did)."""
    procs = live_processes()
    if procs:
        stop_processes([(p.name, p.proc) for p in procs if p.proc], grace=3.0)
        for p in procs:
            p._forget()


atexit.register(_stop_live_at_exit)


# -- a parent that must stop its children when told to stop --------------------------------------
def stop_children_on_signals(
    signals: Iterable[int] = (signal.SIGTERM, signal.SIGHUP),
    grace: float = 3.0,
    exit_after: float = 10.0,
    extra: Callable[[], Iterable[tuple[str, subprocess.Popen]]] | None = None,
) -> None:
    """On SIGTERM/SIGHUP: stop every live ManagedProcess (and ``extra()``), then unwind.

    For benchmarks and other scripts. Python runs signal handlers in the main thread only,
    between bytecodes; a main thread stuck in a C call (a hung copy, a blocking wait that
    retries after EINTR) never gets to raise from one, which is how a benchmark "ignored"
    SIGTERM. So the handler only wakes a helper thread (signal.set_wakeup_fd), which stops
    the children by group at once, then sends the main thread a SIGINT (KeyboardInterrupt:
    ``finally`` blocks still clean up) and, if that has not ended the process within
    ``exit_after`` seconds, exits it with 128 + the signal's number. Call from the main thread.
    """
    signals = list(signals)
    # A blocked signal never wakes us, and SIGINT is how the main thread is unwound below.
    take_stop_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def ignore(signum, frame) -> None:  # the helper thread does the work
        pass

    for sig in signals:
        signal.signal(sig, ignore)
    # The unwinding below is a SIGINT to the main thread; a process started in the background of
    # a non-interactive shell (`nohup … &`, a CI script) inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt for it: the main thread would never unwind.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while True:
            data = os.read(read_end, 64)
            hit = [b for b in data if b in signals]
            if hit:
                break
        signum = hit[0]
        name = signal.Signals(signum).name
        print(f"\n{name}: stopping the processes this one started…", file=sys.stderr, flush=True)
        procs = [(p.name, p.proc) for p in live_processes() if p.proc]
        if extra is not None:
            procs += list(extra())
        seconds = stop_processes(procs, grace=grace, say=lambda text: print(text, file=sys.stderr, flush=True))
        print(f"stopped {len(procs)} in {seconds:.1f} s.", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(exit_after)
        print(f"{name}: the main thread did not unwind in {exit_after:.0f} s; exiting.", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    threading.Thread(target=watch, name="stop-on-signal", daemon=True).start()
