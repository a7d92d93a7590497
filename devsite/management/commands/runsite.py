"""`make run`: the dashboard, a worker, beat and a demo site with two real XRootD servers and their
collectors, and two clients of a client pool.

Runs on DATABASE_URL / CELERY_BROKER_URL: `make run` starts it through devsite.launch, which
points them at the site's own PostgreSQL and Redis under var/ when they are not set.
A child that dies (a door, a collector, the worker, beat, a pool client, the web server) is
restarted with back-off (1, 2, 4 … 30 s) while the others carry on; runsite says which and why.
Ctrl-C, SIGTERM and SIGHUP (the terminal closed) stop everything this command started, by
process group; and every child dies with this command even when it is SIGKILLed or killed
by the OOM killer (devsite.processes: parent-death signal and group guard). Each child's
pid is kept in var/run/<name>.pid, so a start after a crash finds and stops what is left.
"""

from __future__ import annotations

import gc
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from campaigns import runs
from campaigns.runs.versions import xrootd_server_version
from devsite.demo import (
    DEMO_AUDIENCE,
    DEMO_POOL_CAMPAIGN,
    TOKEN_DOORS,
    register_demo_pool,
    register_demo_site,
    register_token_demo,
)
from devsite.processes import PidFile, set_parent_death_signal, take_stop_signals
from devsite.site_children import (
    beat_argv,
    client_argv,
    collector_argv,
    control_worker_argv,
    door_restart,
    door_watches,
    worker_argv,
)
from devsite.supervisor import SELF, Leftovers, Supervisor, port_in_use, port_owner_text
from devsite.token_issuer import TokenIssuer
from devsite.xrootd_server import TokenTrust, XRootDServer, free_port, make_test_ca
from storageops import roles
from storageops.oidc import config as oidc_config
from storageops.oidc import discovery

#: Seconds the children get to stop after SIGTERM before their groups are SIGKILLed. Short:
#: a worker's warm shutdown would wait for a whole run, and runs survive a lost worker.
STOP_GRACE = 3.0


class _Stop(Exception):
    """A stop signal arrived while starting up."""


def _host_port(bind: str) -> tuple[str, int] | None:
    """("127.0.0.1", 8000) from gunicorn's --bind; None for unix sockets and file descriptors."""
    if bind.startswith(("unix:", "fd://")) or ":" not in bind:
        return None
    host, _, port = bind.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"  # noqa: S104 -- only to test whether it is free
    return (host, int(port)) if port.isdigit() else None


class Command(BaseCommand):
    help = "Start the web dashboard, a Celery worker, beat and a demo site of two XRootD doors."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bind", default=os.environ.get("STORAGEOPS_BIND", "127.0.0.1:8000"))
        parser.add_argument("--no-demo", action="store_true", help="Do not start the demo XRootD doors.")
        parser.add_argument(
            "--token-doors",
            action="store_true",
            default=os.environ.get("STORAGEOPS_DEMO_TOKENS", "").lower() in ("1", "on", "true", "yes"),
            help="Also a test storage-token issuer and three davs doors on it: two checking its tokens "
            "(xrootd-scitokens-plugins), one accepting any (STORAGEOPS_DEMO_TOKENS=on; needs root).",
        )
        parser.add_argument(
            "--exit-with-parent",
            action="store_true",
            help="Stop (as on SIGTERM) when the parent process dies, e.g. `make` killed by SIGKILL.",
        )

    def handle(self, *args, bind: str, no_demo: bool, exit_with_parent: bool, token_doors: bool, **options) -> None:
        self.stopping: str | None = None
        self.hurry = False
        self.token_doors = token_doors and not no_demo
        self.issuer: TokenIssuer | None = None
        take_stop_signals()
        handlers = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            self._handle(bind, no_demo, exit_with_parent)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _handle(self, bind: str, no_demo: bool, exit_with_parent: bool) -> None:
        if exit_with_parent:
            parent = os.getppid()
            set_parent_death_signal(signal.SIGTERM)
            if os.getppid() != parent or parent == 1:
                raise CommandError("the parent process is gone already")
        pid_dir = Path(settings.VAR_DIR) / "run"
        self._clear_leftovers(pid_dir)
        address = _host_port(bind)
        if address and port_in_use(*address):
            raise CommandError(
                f"port {address[1]} ({bind}) is in use by {port_owner_text(address[1])}, which is not "
                f"a leftover of an earlier runsite with this var directory ({settings.VAR_DIR}). Stop it, "
                f"or start on another address: --bind HOST:PORT or STORAGEOPS_BIND."
            )
        PidFile.record(pid_dir / f"{SELF}.pid", SELF, os.getpid())
        try:
            self._run(bind, no_demo, pid_dir)
        except _Stop:
            pass
        finally:
            (pid_dir / f"{SELF}.pid").unlink(missing_ok=True)

    def _on_signal(self, signum, frame) -> None:
        if self.stopping is None:
            self.stopping = signal.Signals(signum).name
        elif signum == signal.SIGINT:
            self.hurry = True  # a second Ctrl-C: do not wait for the children any longer

    def _check_stop(self) -> None:
        if self.stopping:
            raise _Stop

    def _say(self, text: str, style=None) -> None:
        """Write to our terminal, which may be gone (SIGHUP): a stop must not fail on that."""
        try:
            self.stdout.write(style(text) if style else text)
            self.stdout.flush()
        except (OSError, ValueError):
            pass

    def _clear_leftovers(self, pid_dir: Path) -> None:
        """Find what an earlier, crashed runsite with this var directory left; stop it."""
        leftovers = Leftovers.find(pid_dir)
        if leftovers.supervisor_running:
            pid = leftovers.supervisor.pid
            raise CommandError(
                f"runsite is already running with this var directory ({settings.VAR_DIR}) as "
                f"pid {pid}; stop it first (Ctrl-C in its terminal, or kill {pid})."
            )
        if leftovers.supervisor is None and not leftovers.running and not leftovers.gone:
            return
        self._say(leftovers.describe(), self.style.WARNING)
        if leftovers.running:
            seconds = leftovers.stop(grace=STOP_GRACE, say=self._say)
            self._say(f"Stopped what the earlier runsite left in {seconds:.1f} s.")
        else:
            leftovers.clear()

    def _run(self, bind: str, no_demo: bool, pid_dir: Path) -> None:
        call_command("migrate", verbosity=0, interactive=False)
        call_command("collectstatic", verbosity=0, interactive=False)
        password = self._admin_password()
        servers: list[XRootDServer] = []
        clients: list[str] = []
        supervisor = Supervisor(pid_dir, say=lambda text: self._say(text, self.style.WARNING))
        try:
            self._check_stop()
            if not no_demo:
                servers = self._start_doors(supervisor)
                campaign = register_demo_site(
                    {s.name: s.root_url_for("/data/demo/") for s in servers},
                    xrootd_version=xrootd_server_version(servers[0].root_url),
                    watches={s.name: door_watches(s) for s in servers},
                )
                clients = register_demo_pool(campaign)
            if self.token_doors:
                token_servers = self._start_token_doors(supervisor)
                servers += token_servers
            python = sys.executable
            env = dict(os.environ, GFAL_PYTHONBIN="/usr/bin/python3", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
            # file:// endpoints of the demo lie in its own var folder, unless the operator names roots.
            env.setdefault("STORAGEOPS_FILE_ROOTS", str(demo_file_root()))
            base = str(settings.BASE_DIR)
            self._check_stop()
            supervisor.start(
                "web",
                [
                    python,
                    "-m",
                    "gunicorn",
                    "storageops.wsgi:application",
                    "-c",
                    "python:storageops.gunicorn_conf",  # sized for the machine (docs/benchmarks.md)
                    "-b",
                    bind,
                    "--graceful-timeout",
                    str(int(STOP_GRACE) - 1),
                    # gunicorn's default is one socket in the home folder, shared by every
                    # instance: a second site beside this one would take it over.
                    *_control_socket(pid_dir / "gunicorn.ctl"),
                ],
                env,
                base,
            )
            self._check_stop()
            supervisor.start("worker", worker_argv(), env, base)
            self._check_stop()
            supervisor.start("control", control_worker_argv(), env, base)
            self._check_stop()
            supervisor.start("beat", beat_argv(), env, base)
            for server in servers:
                # A newcomer's first dashboard shows the doors' CPU, network, the daemon's own
                # CPU and log patterns, and the change log of a restart, as a real site's would.
                self._check_stop()
                supervisor.start(f"collector-{server.name}", collector_argv(server.name), env, base)
            for client in clients:
                # The demo pool's clients: a pooled run from the first page (docs/scale-out.md).
                self._check_stop()
                supervisor.start(f"client-{client}", client_argv(client), env, base)
            if not no_demo and not campaign.runs.exists():
                run = runs.start_run(campaign, by=runs.command_starter("runsite"), trigger="demo")
                self._say(f"Demo run #{run.pk} of {campaign.name} queued.")
            self._say(
                f"\nStorageOps is up: http://{bind}/  (log in as admin / {password})\n"
                f"Health: http://{bind}/healthz    Ctrl-C stops everything.",
                self.style.SUCCESS,
            )
            for line, warn in sign_on_lines(bind):
                self._say(line, self.style.WARNING if warn else None)
            self._say("")
            for server in servers:
                # Its pid, to try what a door's death does (docs/operations.md): it comes back.
                url = server.davs_url_for("/data/tokens/") if server.name in TOKEN_DOORS else server.root_url_for(
                    "/data/demo/")  # fmt: skip
                self._say(f"  demo door {server.name}: {url} (xrootd pid {server.pid})")
            if self.issuer is not None:
                self._say(f"  demo token issuer: {self.issuer.url} (Admin → Token issuers; the readiness grid "
                          "checks its doors with tokens, anytoken's wrong tokens are let through: red)")  # fmt: skip
            if clients:
                self._say(f"  demo pool: clients {', '.join(clients)}; start campaign {DEMO_POOL_CAMPAIGN} to try it")
            # A child that dies is restarted with back-off and the others carry on (say() tells
            # which, how it ended and when it comes back): the site stops only when asked.
            while not self.stopping:
                supervisor.tend()
                time.sleep(0.2)
        finally:
            self._say(f"Stopping ({self.stopping or 'an error'})…")
            seconds = supervisor.stop_all(grace=STOP_GRACE, hurry=lambda: self.hurry)
            for server in servers:
                server.stop()  # stopped already with the others; forgets it
            if self.issuer is not None:
                self.issuer.stop()
            self._say(f"Stopped in {seconds:.1f} s.")
            # Nothing is left to clean up: spare the interpreter's final collection of every
            # object Django, Celery and the migrations created (seconds on a busy machine).
            gc.freeze()

    def _admin_password(self) -> str:
        """The admin password: STORAGEOPS_ADMIN_PASSWORD, or one generated once and kept in var/."""
        path = Path(settings.VAR_DIR) / "admin-password"
        password = os.environ.get("STORAGEOPS_ADMIN_PASSWORD") or (path.read_text().strip() if path.exists() else "")
        if not password:
            password = secrets.token_urlsafe(12)
            path.write_text(password + "\n")
            path.chmod(0o600)
        user, _ = User.objects.get_or_create(username="admin", defaults={"email": "admin@localhost"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        user.groups.add(Group.objects.get(name=roles.ADMIN))
        return password

    def _start_doors(self, supervisor: Supervisor) -> list[XRootDServer]:
        root = Path(settings.VAR_DIR) / "demo"
        servers = []
        for name in ("door1", "door2"):
            self._check_stop()
            server = XRootDServer(
                name=name, data_dir=root / name / "data", port=free_port(), workdir=root / name / "run"
            )
            server.start()
            supervisor.watch(name, server.process, restart=door_restart(server))
            servers.append(server)
        return servers

    def _start_token_doors(self, supervisor: Supervisor) -> list[XRootDServer]:
        """The token issuer (in this process) and its doors: two trusting it, one without the
        plugin, all registered with their endpoints on the issuer (devsite.demo)."""
        root = Path(settings.VAR_DIR) / "demo"
        ca = make_test_ca(root / "ca")
        self.issuer = TokenIssuer(ca).start()
        trust = TokenTrust(self.issuer.url, DEMO_AUDIENCE, ca.ca_cert, base_path="/data")
        servers = []
        for name in TOKEN_DOORS:
            self._check_stop()
            server = XRootDServer(
                name=name, data_dir=root / name / "data", port=free_port(), workdir=root / name / "run", https=ca,
                tokens=trust if name != "anytoken" else None,
            )  # fmt: skip
            server.start()
            supervisor.watch(name, server.process, restart=door_restart(server))
            servers.append(server)
        urls = {s.name: s.davs_url_for("/data/tokens/") for s in servers}
        watches = {s.name: door_watches(s) for s in servers}
        register_token_demo(self.issuer, urls, str(ca.ca_dir), str(ca.ca_cert), watches)
        return servers


def sign_on_lines(bind: str) -> list[tuple[str, bool]]:
    """Whether sign-on is on, with which provider, and whether it answers: (line, is a warning)."""
    cfg = discovery.config()
    lines = [(oidc_config.summary(cfg), False)]
    if cfg is None:
        return lines
    lines.append((f"  redirect URI to register at the provider: http://{bind}/oidc/callback/", False))
    try:
        discovery.metadata(cfg, fresh=True)
    except discovery.ProviderUnavailable as exc:
        lines.append((f"  the provider does not answer now, so signing in through it fails: {exc}", True))
    return lines


def demo_file_root() -> Path:
    """The folder the demo's file:// endpoints may lie in (STORAGEOPS_FILE_ROOTS): its own var's."""
    root = Path(settings.VAR_DIR) / "files"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _control_socket(path: Path) -> list[str]:
    """gunicorn's control socket at ``path``; none where the path is too long for a unix socket."""
    return ["--control-socket", str(path)] if len(str(path)) <= 107 else ["--no-control-socket"]
