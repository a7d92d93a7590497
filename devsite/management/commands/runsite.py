"""`make run`: the dashboard, a worker, beat and a demo site with two real XRootD servers.

Runs on the embedded defaults unless DATABASE_URL / CELERY_BROKER_URL say otherwise.
Ctrl-C stops everything this command started, by pid.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from campaigns import runs
from campaigns.runs.versions import xrootd_server_version
from devsite.demo import register_demo_site
from devsite.supervisor import Supervisor
from devsite.xrootd_server import XRootDServer, free_port
from storageops import roles


class Command(BaseCommand):
    help = "Start the web dashboard, a Celery worker, beat and a demo site of two XRootD doors."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bind", default=os.environ.get("STORAGEOPS_BIND", "127.0.0.1:8000"))
        parser.add_argument("--no-demo", action="store_true", help="Do not start the demo XRootD doors.")

    def handle(self, *args, bind: str, no_demo: bool, **options) -> None:
        call_command("migrate", verbosity=0, interactive=False)
        call_command("collectstatic", verbosity=0, interactive=False)
        password = self._admin_password()
        servers: list[XRootDServer] = []
        supervisor = Supervisor()
        stopping = False

        def stop(signum, frame) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            if not no_demo:
                servers = self._start_doors()
                campaign = register_demo_site(
                    {s.name: s.root_url_for("/data/demo/") for s in servers},
                    xrootd_version=xrootd_server_version(servers[0].root_url),
                )
            python = sys.executable
            env = dict(os.environ, GFAL_PYTHONBIN="/usr/bin/python3", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
            base = str(settings.BASE_DIR)
            supervisor.start(
                "web",
                [
                    python,
                    "-m",
                    "gunicorn",
                    "storageops.wsgi:application",
                    "-b",
                    bind,
                    "-w",
                    "2",
                    "--access-logfile",
                    "-",
                ],
                env,
                base,
            )
            supervisor.start(
                "worker",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "storageops",
                    "worker",
                    "-Q",
                    f"{settings.STORAGEOPS_CONTROL_QUEUE},{settings.STORAGEOPS_TRANSFERS_QUEUE}",
                    "-c",
                    "2",
                    "-l",
                    "info",
                    "-n",
                    "runsite@%h",
                ],
                env,
                base,
            )
            supervisor.start(
                "beat",
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "storageops",
                    "beat",
                    "-l",
                    "info",
                    "-s",
                    str(settings.VAR_DIR / "celerybeat-schedule"),
                ],
                env,
                base,
            )
            if not no_demo and not campaign.runs.exists():
                run = runs.start_run(campaign, trigger="demo")
                self.stdout.write(f"Demo run #{run.pk} of {campaign.name} queued.")
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nStorageOps is up: http://{bind}/  (log in as admin / {password})\n"
                    f"Health: http://{bind}/healthz    Ctrl-C stops everything.\n"
                )
            )
            for server in servers:
                self.stdout.write(f"  demo door {server.name}: {server.root_url_for('/data/demo/')}")
            while not stopping:
                exited = supervisor.first_exited()
                if exited:
                    self.stderr.write(f"{exited.name} exited ({exited.returncode}); stopping everything.")
                    break
                time.sleep(0.5)
        finally:
            self.stdout.write("Stopping…")
            supervisor.stop_all()
            for server in servers:
                server.stop()

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

    def _start_doors(self) -> list[XRootDServer]:
        root = Path(settings.VAR_DIR) / "demo"
        servers = []
        for name in ("door1", "door2"):
            server = XRootDServer(
                name=name, data_dir=root / name / "data", port=free_port(), workdir=root / name / "run"
            )
            server.start()
            servers.append(server)
        return servers
