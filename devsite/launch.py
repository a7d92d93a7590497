"""Run a command beside the site's own PostgreSQL and Redis: `make run` and `make test`.

    python -m devsite.launch [--set site|test] [--exit-with-parent] -- COMMAND ...

Django's settings read DATABASE_URL and CELERY_BROKER_URL when they are imported, so the
servers must be up before any Django process starts: this launcher (no Django in it) starts
what is not configured -- PostgreSQL when DATABASE_URL is unset, Redis when CELERY_BROKER_URL
is unset (devsite.services) -- exports their URLs, and runs COMMAND (`manage.py runsite`,
pytest) as its child. A site's own servers, named by those variables, are used as they are.
When no key to seal secrets is given (STORAGEOPS_SECRETS_KEY or its _FILE), var/secrets.key is
made once and exported as STORAGEOPS_SECRETS_KEY_FILE.

Stopping: SIGINT (Ctrl-C), SIGTERM and SIGHUP are passed on to COMMAND, which runs in a
session of its own so that the terminal's Ctrl-C reaches it once, through us; once it has
exited (runsite has stopped web, worker, beat and the collectors), PostgreSQL and Redis are
stopped. If the launcher itself dies (SIGKILL), the parent-death signal and the group guard
take COMMAND and the servers with it, and the next start clears what is left.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from devsite.processes import (
    dying_with_parent,
    guard_group,
    release_group,
    set_parent_death_signal,
    take_stop_signals,
)
from devsite.services import ServiceDirs, ServiceError, Services, claim, default_var_dir, secrets_key_env

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # the terminal is gone (SIGHUP): a stop must not fail on that
        pass


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devsite.launch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", default="site", help="which set of own servers: site (make run) or test")
    parser.add_argument("--exit-with-parent", action="store_true", help="stop (as on SIGTERM) when our parent dies")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given (… -- COMMAND ARGS)")
    return args


class Launcher:
    def __init__(self, services: Services, command: list[str]) -> None:
        self.services = services
        self.command = command
        self.child: subprocess.Popen | None = None
        self.stopping: int | None = None
        self.passed_on = False

    def _on_signal(self, signum: int, frame) -> None:
        if self.stopping is None:
            self.stopping = signum
        if self.child is not None and self.child.poll() is None:
            # A second Ctrl-C is passed on too: runsite then stops without waiting.
            os.kill(self.child.pid, signum)
            self.passed_on = True

    def run(self) -> int:
        services = self.services
        if services.postgres or services.redis:
            services.start()
            names = [
                f"{s.name} on {s.port if s.proc else '-'}" for s in (services.postgres, services.redis) if s is not None
            ]
            _say(f"Own {' and '.join(names)} (127.0.0.1), data under {services.dirs.root}.")
        if self.stopping is not None:
            return 128 + self.stopping
        self.child = subprocess.Popen(
            dying_with_parent(self.command),
            env={**os.environ, **services.env(), **secrets_key_env(services.dirs.var_dir)},
            start_new_session=True,
        )
        guard_group(self.child.pid)
        if self.stopping is not None and not self.passed_on:  # arrived while the child was being started
            os.kill(self.child.pid, self.stopping)
        returncode = self.child.wait()
        release_group(self.child.pid)
        # As a shell reports it: a child killed by signal N is 128 + N (sys.exit takes no negatives).
        return 128 - returncode if returncode < 0 else returncode

    def stop(self) -> None:
        if self.services.running:
            started = time.monotonic()
            self.services.stop()
            _say(f"Stopped the own PostgreSQL/Redis in {time.monotonic() - started:.1f} s.")


def main(argv: list[str] | None = None) -> int:
    take_stop_signals()
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.exit_with_parent:
        parent = os.getppid()
        set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent or parent == 1:
            _say("the parent process is gone already")
            return 1
    dirs = ServiceDirs(default_var_dir(), args.set)
    services = Services(
        dirs,
        postgres="DATABASE_URL" not in os.environ,
        redis="CELERY_BROKER_URL" not in os.environ,
        durable=args.set != "test",
        say=_say,
    )
    launcher = Launcher(services, args.command)
    handlers = {sig: signal.signal(sig, launcher._on_signal) for sig in _FORWARDED}
    try:
        pid_file = claim(dirs)
    except ServiceError as exc:
        _say(str(exc))
        return 1
    try:
        return launcher.run()
    except ServiceError as exc:
        _say(f"error: {exc}")
        return 1
    finally:
        launcher.stop()
        pid_file.unlink(missing_ok=True)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
