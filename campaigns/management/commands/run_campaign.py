"""`manage.py run_campaign NAME [--wait]`: start a run from the shell, optionally watch it.

With --wait the exit status tells how the run ended: 0 succeeded (every planned transfer),
2 partial (some failed or were never tried), 1 failed or cancelled (or the run could not start).
"""

from __future__ import annotations

import sys
import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from campaigns import runs
from campaigns.models import Campaign, Run
from campaigns.results import concurrency, readers
from storageops.units import human_bytes, human_duration, human_rate

_BAR = 30
# Exit statuses of --wait by final state; anything not listed (failed, cancelled) exits 1.
EXIT_STATUS = {"succeeded": 0, "partial": 2}


class Command(BaseCommand):
    help = "Start a run of a campaign; with --wait, show its progress and print the step table at the end."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="The campaign's name.")
        parser.add_argument("--wait", action="store_true", help="Wait for the run to end, showing progress.")
        parser.add_argument("--poll", type=float, default=1.0, help="Seconds between progress updates.")

    def handle(self, *args, name: str, wait: bool, poll: float, **options) -> None:
        try:
            campaign = Campaign.objects.get(name=name)
        except Campaign.DoesNotExist:
            known = ", ".join(Campaign.objects.values_list("name", flat=True)[:20]) or "none"
            raise CommandError(f"No campaign named {name!r} (known: {known})") from None
        try:
            run = runs.start_run(campaign, by=runs.command_starter("run_campaign"), trigger="command")
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        self.stdout.write(f"Run #{run.pk} of {campaign.name} queued: {run.planned_files} files, "
                          f"{human_bytes(run.planned_bytes)}.")  # fmt: skip
        if wait:
            self.follow(run, poll)

    def follow(self, run: Run, poll: float) -> None:
        """Watch the run to its end, print its report, and exit with the status of its outcome."""
        try:
            run = self._watch(run.pk, max(poll, 0.2))
        except KeyboardInterrupt:
            self.stdout.write("\nStopped watching; the run goes on (cancel it from the dashboard or the API).")
            return
        self._report(run)
        status = EXIT_STATUS.get(run.state, 1)
        if status:
            hint = f" `manage.py retry_failed {run.pk}` re-drives them." if runs.retryable_count(run) else ""
            raise CommandError(
                f"Run #{run.pk} ended {run.state}: {run.stop_reason or run.error[-500:]}.{hint}", returncode=status
            )

    def _watch(self, run_id: int, poll: float) -> Run:
        interactive = sys.stdout.isatty()
        last = ""
        while True:
            run = Run.objects.get(pk=run_id)
            done = run.progress_percent
            filled = int(_BAR * done / 100)
            line = (
                f"[{'#' * filled}{'.' * (_BAR - filled)}] {done:5.1f}%  {run.get_state_display():10} "
                f"ok {run.files_done} failed {run.files_failed}  {human_rate(run.throughput_bps)}"
                f"  step {run.current_step if run.current_step is not None else '-'}"
                f" x{run.current_concurrency or '-'}  ETA {human_duration(run.eta_seconds)}"
            )
            if interactive:
                self.stdout.write("\r" + line, ending="")
                self.stdout.flush()
            elif line != last:
                self.stdout.write(line)
            last = line
            if not run.is_live:
                if interactive:
                    self.stdout.write("")
                return run
            time.sleep(poll)

    def _report(self, run: Run) -> None:
        total = run.summary.get("total", {})
        counts = readers.file_counts(run)
        self.stdout.write(
            # Cancelled (started, then stopped) apart from skipped (never started): not the same loss;
            # nor are the files of a time-bounded sweep's pool that no step needed.
            f"\nRun #{run.pk} {run.state}: {counts['ok']} ok, {counts['failed']} failed, {counts['cancelled']} "
            f"cancelled, {counts['skipped']} skipped"
            + (f", {counts['not_needed']} not needed" if counts["not_needed"] else "")
            + f"; {human_bytes(run.bytes_done)} at {human_rate(total.get('throughput_bps'))} ({run.stop_reason})"
        )
        header = (
            f"{'step':>4} {'conc':>5} {'achieved':>8} {'max':>4} {'':>10} {'ok':>7} {'failed':>7} {'window':>10} "
            f"{'throughput':>12} {'p50':>9} {'p95':>9}"
        )
        self.stdout.write(header)
        for s in run.summary.get("steps", []):
            # What the step really had in flight beside what it asked for (concurrency module).
            mean, peak, off = concurrency.achieved(s)
            self.stdout.write(
                f"{s['step']:>4} {s['concurrency'] or '-':>5} {'-' if mean is None else f'{mean:.2f}':>8} "
                f"{'-' if peak is None else peak:>4} {'off target' if off else '':>10} "
                f"{s['files_ok']:>7} {s['files_failed']:>7} "
                f"{human_duration(s['window_seconds']):>10} {human_rate(s['throughput_bps']):>12} "
                f"{human_duration(s['duration_p50']):>9} {human_duration(s['duration_p95']):>9}"
            )
        errors = total.get("errors") or {}
        if errors:
            self.stdout.write("errors: " + ", ".join(f"{k} {v}" for k, v in errors.items()))
