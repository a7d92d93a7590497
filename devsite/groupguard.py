"""The group guard: kills the process groups of a parent's children once that parent is gone.

Started by devsite.processes, one per parent process, with a pipe as its stdin. The parent
writes ``add <sid>`` when it starts a child in a session of its own (the session's id is the
child's pid) and ``del <sid>`` when it has stopped it. When the pipe reaches end-of-file --
the parent exited, normally or by SIGKILL, OOM kill, anything -- every process group of every
session still registered is sent SIGKILL, and the guard exits. PR_SET_PDEATHSIG already kills
each direct child with its parent; this reaches what the children forked (gunicorn's workers,
Celery's pool, xrootd's xrdcp for TPC in a group of its own), which would otherwise run on as
orphans until they notice, or for as long as a copy takes.

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
    sessions: set[int] = set()
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
            op, _, sid = line.decode().partition(" ")
            if not sid.isdigit():
                continue
            if op == "add":
                sessions.add(int(sid))
            elif op == "del":
                sessions.discard(int(sid))
    for pgid in sessions | _groups_of_sessions(sessions):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _groups_of_sessions(sessions: set[int]) -> set[int]:
    """The process groups of every live process in ``sessions``, from /proc/<pid>/stat."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) in sessions:  # state ppid pgrp session
            found.add(int(fields[2]))
    return found


if __name__ == "__main__":
    main()
