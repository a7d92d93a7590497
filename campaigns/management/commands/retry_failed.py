"""`manage.py retry_failed RUN_ID [--wait]`: re-drive a finished run's transfers that did not
succeed (failed, timed out, skipped, cancelled) as a new run linked to it; with --wait, watch it
and exit as run_campaign does (0 succeeded, 2 partial, 1 failed or cancelled)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from campaigns import runs
from campaigns.management.commands import run_campaign
from campaigns.models import Run
from storageops.units import human_bytes


class Command(run_campaign.Command):
    help = "Retry the failed, timed-out and skipped transfers of a finished run as a new, linked run."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run_id", type=int, help="The run to retry.")
        parser.add_argument("--wait", action="store_true", help="Wait for the new run to end, showing progress.")
        parser.add_argument("--poll", type=float, default=1.0, help="Seconds between progress updates.")

    def handle(self, *args, run_id: int, wait: bool, poll: float, **options) -> None:
        old = Run.objects.filter(pk=run_id).first()
        if old is None:
            raise CommandError(f"No run #{run_id}.")
        try:
            run = runs.retry_failed(old, by=runs.command_starter("retry_failed"), trigger="command")
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"Run #{run.pk} queued: retry of run #{old.pk}, {run.planned_files} files, "
                          f"{human_bytes(run.planned_bytes)}.")  # fmt: skip
        if wait:
            self.follow(run, poll)
