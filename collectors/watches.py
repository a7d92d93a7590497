"""Watches of a host: config files, service restarts and hangs, and reboots, logged as Events.

The previous state (file contents, process identities, boot time) is kept in memory by the
collector process that owns the watcher. Boot time and service start times are also stored
as samples (``host.boot_time``, ``proc.start_time``), so a collector that starts again after
a reboot or a restart still notices what happened while it was not running.
"""

from __future__ import annotations

import difflib
import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.db.models import F, Value
from django.db.models.functions import Concat

from collectors.choices import EventKind
from collectors.events import log_event
from collectors.models import Event, Host, MetricSample
from collectors.probes import procfs

MAX_DIFF_BYTES = 64 * 1024
# Config files are small; a file bigger than this is hashed but not diffed line by line.
MAX_CONFIG_BYTES = 4 * 1024 * 1024


# --------------------------------------------------------------------------- services

STOPPED_STATES = ("T", "t")  # /proc/<pid>/stat: stopped by a signal, or while traced


@dataclass(frozen=True)
class _Hang:
    event: int
    since: datetime
    pid: int


@dataclass
class ServiceState:
    """What a watched service looks like now: its processes and how to tell incarnations apart."""

    name: str
    pids: list[int] = field(default_factory=list)
    main: procfs.ProcStat | None = None
    systemd_active_since: str = ""  # ActiveEnterTimestamp; empty when unknown

    @property
    def identity(self) -> tuple[int, int] | None:
        # pid alone can be reused; pid plus start time names one incarnation.
        return (self.main.pid, self.main.start_ticks) if self.main else None

    def start_epoch(self, btime: int) -> float | None:
        return btime + self.main.start_ticks / procfs.CLK_TCK if self.main else None


def _systemd_show(unit: str) -> tuple[str, int | None]:
    """(ActiveEnterTimestamp, MainPID) of a unit; ("", None) when systemd cannot say."""
    systemctl = shutil.which("systemctl")
    if not systemctl:
        return "", None
    try:
        out = subprocess.run(
            [systemctl, "show", "-p", "ActiveEnterTimestamp", "-p", "MainPID", "--", unit],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "", None
    if out.returncode != 0:  # e.g. a container without systemd as pid 1
        return "", None
    values = dict(line.partition("=")[::2] for line in out.stdout.splitlines())
    pid = int(values.get("MainPID") or 0)
    return values.get("ActiveEnterTimestamp", ""), pid or None


def resolve_service(spec: dict) -> ServiceState:
    """Find a service's processes by pid file, systemd unit or process name (in that order)."""
    state = ServiceState(name=spec["name"])
    pids: list[int] = []
    if spec.get("systemd_unit"):
        state.systemd_active_since, main_pid = _systemd_show(spec["systemd_unit"])
        if main_pid:
            pids = [main_pid]
    if spec.get("pidfile"):
        pid = procfs.pid_from_file(spec["pidfile"])
        pids = [pid] if pid else []
    elif spec.get("process") and not pids:
        pids = procfs.pids_by_name(spec["process"])
    stats = [s for s in (procfs.proc_stat(p) for p in pids) if s is not None]
    state.pids = [s.pid for s in stats]
    if stats:
        # The main process is the oldest one whose parent is not itself part of the service
        # (a daemon's forked helpers come and go without the service restarting).
        pid_set = set(state.pids)
        roots = [s for s in stats if s.ppid not in pid_set] or stats
        state.main = min(roots, key=lambda s: (s.start_ticks, s.pid))
    return state


# --------------------------------------------------------------------------- watcher


def _last_value(host: Host, metric: str, label: str = "") -> float | None:
    return (
        MetricSample.objects.filter(host=host, metric=metric, label=label)
        .order_by("-time")
        .values_list("value", flat=True)
        .first()
    )


def _diff(path: str, old: str, new: str) -> str:
    text = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a{path}", f"b{path}"))
    if len(text.encode()) > MAX_DIFF_BYTES:
        text = text.encode()[:MAX_DIFF_BYTES].decode(errors="ignore") + "\n… (diff cut at 64 KB)\n"
    return text


class Watcher:
    """Compares each tick with the previous one and logs what changed."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._files: dict[str, tuple[str, str | None]] = {}  # path -> (sha256, text or None)
        self._services: dict[str, tuple[tuple[int, int] | None, str]] = {}
        self._hangs: dict[str, _Hang] = {}
        self._btime: int | None = None

    # Each check returns the samples it wants stored with the tick (state that must
    # survive a collector restart); events are written at once.

    def check_reboot(self, now: datetime) -> list[MetricSample]:
        btime = procfs.boot_time()
        previous = self._btime
        if previous is None:
            stored = _last_value(self.host, "host.boot_time")
            previous = int(stored) if stored is not None else None
        self._btime = btime
        # Boot time is computed by the kernel from the clock; NTP steps move it a little.
        if previous is not None and abs(btime - previous) > 5:
            booted = datetime.fromtimestamp(btime, UTC)
            log_event(
                "reboot",
                f"{self.host.name} rebooted at {booted:%Y-%m-%d %H:%M:%S} UTC",
                source="collector",
                host=self.host,
                time=booted,
                detail=f"boot time changed from {previous} to {btime} (seconds since the epoch)",
            )
        if previous is None or previous != btime:
            return [MetricSample(host=self.host, metric="host.boot_time", time=now, value=btime)]
        return []

    def check_files(self, now: datetime) -> None:
        for path in self.host.watched_files:
            try:
                data = Path(path).read_bytes()
            except OSError:
                data = None
            digest = hashlib.sha256(data).hexdigest() if data is not None else "missing"
            text = data.decode(errors="replace") if data is not None and len(data) <= MAX_CONFIG_BYTES else None
            previous = self._files.get(path)
            self._files[path] = (digest, text)
            if previous is None or previous[0] == digest:
                continue
            old_digest, old_text = previous
            if data is None:
                summary, detail = f"{path} was removed", ""
            else:
                summary = f"{path} changed" if old_digest != "missing" else f"{path} was created"
                detail = _diff(path, old_text or "", text) if text is not None else ""
            detail = f"sha256 {old_digest} → {digest}\n{detail}"
            log_event("config_change", summary, source="collector", host=self.host, time=now, detail=detail)

    def file_texts(self) -> dict[str, str | None]:
        """The watched files' texts as the last check_files read them (None: missing or too big)."""
        return {path: text for path, (_, text) in self._files.items()}

    def check_services(self, now: datetime, states: list[ServiceState]) -> list[MetricSample]:
        samples = []
        btime = self._btime or procfs.boot_time()
        for state in states:
            self._check_hang(state, now)
            identity, since = state.identity, state.systemd_active_since
            start = state.start_epoch(btime)
            if state.name not in self._services:
                # First look since this collector started: compare with the stored start time
                # and pid (start times derive from btime, which NTP may move by a second).
                stored = _last_value(self.host, "proc.start_time", state.name)
                stored_pid = _last_value(self.host, "proc.pid", state.name)
                changed = (
                    stored is not None
                    and identity is not None
                    and (abs(stored - start) > 1 or stored_pid != identity[0])
                )
                if changed:
                    self._log_restart(state, now, "restarted while the collector was not running")
                if identity is not None and (stored is None or changed):
                    samples += self._start_samples(state, now, start)
                self._services[state.name] = (identity, since)
                continue
            old_identity, old_since = self._services[state.name]
            self._services[state.name] = (identity, since)
            if identity == old_identity and since == old_since:
                continue
            if identity is None:
                self._log_restart(state, now, f"stopped (was pid {old_identity[0]})" if old_identity else "stopped")
            elif old_identity is None:
                self._log_restart(state, now, f"started (pid {identity[0]})")
            else:
                self._log_restart(state, now, f"restarted (pid {old_identity[0]} → {identity[0]})")
            if identity is not None:
                samples += self._start_samples(state, now, start)
        return samples

    def _check_hang(self, state: ServiceState, now: datetime) -> None:
        """A daemon stopped by a signal is one event: logged when first seen stopped, and given
        its end and length when it runs again (or is gone). Its copies only time out, each on
        its own, and one shorter than their deadline left no trace at all."""
        main = state.main
        hang = self._hangs.get(state.name)
        stopped = main is not None and main.state in STOPPED_STATES
        if stopped and hang is None:
            event = log_event(
                EventKind.SERVICE_HUNG, f"{state.name} hung: pid {main.pid} stopped by a signal, answering nothing",
                source="collector", host=self.host, time=now,
                detail=f"process state {main.state} (stopped) since at most one sample before {now.isoformat()}",
            )  # fmt: skip
            self._hangs[state.name] = _Hang(event.pk, now, main.pid)
        elif hang is not None and not (stopped and main.pid == hang.pid):
            del self._hangs[state.name]
            seconds = (now - hang.since).total_seconds()
            after = "running again" if main is not None and main.pid == hang.pid else "gone"
            Event.objects.filter(pk=hang.event).update(
                summary=f"{state.name} hung for {seconds:.0f} s: pid {hang.pid} stopped by a signal, then {after}",
                detail=Concat(F("detail"), Value(f"\nended {now.isoformat()} ({after}), after {seconds:.1f} s")),
            )

    def _start_samples(self, state: ServiceState, now: datetime, start: float) -> list[MetricSample]:
        label = state.name[:64]
        return [
            MetricSample(host=self.host, metric="proc.start_time", label=label, time=now, value=start),
            MetricSample(host=self.host, metric="proc.pid", label=label, time=now, value=state.main.pid),
        ]

    def _log_restart(self, state: ServiceState, now: datetime, what: str) -> None:
        detail = f"pids now: {state.pids}"
        if state.systemd_active_since:
            detail += f"\nsystemd ActiveEnterTimestamp: {state.systemd_active_since}"
        log_event(
            "service_restart", f"{state.name} {what}", source="collector", host=self.host, time=now, detail=detail
        )
