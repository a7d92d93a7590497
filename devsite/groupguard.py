"""The group guard: kills the process groups of a parent's children once that parent is gone.

Started by devsite.processes, one per parent process, with a pipe as its stdin. The parent
writes ``add <sid> <start>`` when it starts a child in a session of its own (the session's id
is the child's pid, ``start`` its start time in clock ticks) and ``del <sid>`` when it has
stopped it. When the pipe reaches end-of-file -- the parent exited, normally or by SIGKILL, OOM
kill, anything -- every process group of every session still registered is sent SIGKILL, and
the guard exits. PR_SET_PDEATHSIG already kills
each direct child with its parent; this reaches what the children forked (gunicorn's workers,
Celery's pool, xrootd's xrdcp for TPC in a group of its own), which would otherwise run on as
orphans until they notice, or for as long as a copy takes.

A child that died on its own may never be deleted, and its pid may since lead an unrelated
process's session (pids wrap at 32768 here): a live process with that pid and another start
time is not ours, and its session is left alone. The kernel reuses no pid still naming a
session, so such a session of ours has no members left to kill anyway.

Standard library only, run as ``python -I -S groupguard.py``: no Django, no site-packages.
"""

from __future__ import annotations

import os
import signal


def main() -> None:
    # A terminal's Ctrl-C or hang-up is for the parent: the guard has its own session anyway,
    # and exits right after its parent does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sessions: dict[int, int | None] = {}
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            op, _, rest = line.decode().partition(" ")
            sid, _, start = rest.partition(" ")
            if not sid.isdigit():
                continue
            if op == "add":
                sessions[int(sid)] = int(start) if start.isdigit() else None
            elif op == "del":
                sessions.pop(int(sid), None)
    ours = {sid for sid, start in sessions.items() if not _reused(sid, start)}
    for pgid in ours | _groups_of_sessions(ours):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _reused(pid: int, start: int | None) -> bool:
    """A process lives with ``pid`` but started at another time than the one registered (or no
    time was registered, so that it cannot be told apart from a stranger)."""
    fields = _stat(pid)
    return fields is not None and (start is None or int(fields[19]) != start)


def _stat(pid: int | str) -> list[str] | None:
    """Fields 3... of /proc/<pid>/stat (state ppid pgrp session ...), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _groups_of_sessions(sessions: set[int]) -> set[int]:
    """The process groups of every live process in ``sessions``, from /proc/<pid>/stat."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat(name)
        if fields is not None and int(fields[3]) in sessions:  # state ppid pgrp session
            found.add(int(fields[2]))
    return found


if __name__ == "__main__":
    main()
