"""The group guard: kills the process groups of a parent's children once that parent is gone.

Started by devsite.processes, one per parent process, with a pipe as its stdin. The parent
writes ``add <pgid>`` when it starts a child in a session of its own and ``del <pgid>`` when
it has stopped it. When the pipe reaches end-of-file -- the parent exited, normally or by
SIGKILL, OOM kill, anything -- every group still registered is sent SIGKILL, and the guard
exits. PR_SET_PDEATHSIG already kills each direct child with its parent; this reaches what
the children forked (gunicorn's workers, Celery's pool, xrootd's xrdcp for TPC), which
would otherwise run on as orphans until they notice.

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
    groups: set[int] = set()
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
            op, _, pgid = line.decode().partition(" ")
            if not pgid.isdigit():
                continue
            if op == "add":
                groups.add(int(pgid))
            elif op == "del":
                groups.discard(int(pgid))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


if __name__ == "__main__":
    main()
