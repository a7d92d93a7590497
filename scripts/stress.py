"""Run a command beside a CPU hog: one busy process per core, stopped when the command ends.

    python3 scripts/stress.py [--seconds N] [--hogs N] -- make test

The suite must pass on a machine that other work keeps busy; this is that machine, on demand.
Each hog is a session of its own, the way another user's job is, so the kernel's per-session
scheduling (autogroup) does not fold them into the command's own share. Each also ends itself
after --seconds (SIGALRM), so not even a killed parent can leave one spinning.
Only the standard library: it runs before the virtual environment exists.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

HOG = "import signal, sys\nsignal.alarm(int(sys.argv[1]))\nwhile True:\n    pass\n"


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=3600, help="each hog's time limit (default 3600)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1, help="busy processes (default: one a core)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    signal.signal(signal.SIGTERM, _terminate)
    hogs: list[subprocess.Popen] = []
    try:
        for _ in range(args.hogs):
            hogs.append(subprocess.Popen([sys.executable, "-c", HOG, str(args.seconds)], start_new_session=True))
        print(f"stress: {len(hogs)} busy process(es), pids {[h.pid for h in hogs]}, for at most {args.seconds} s")
        sys.stdout.flush()
        return subprocess.call(command)
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
        print(f"stress: stopped {len(hogs)} busy process(es)")


if __name__ == "__main__":
    sys.exit(main())
