"""Child processes started by StorageOps itself (make run), its tests and its benchmarks.

Each child gets a session of its own, so that it and whatever it forks (gunicorn's and
Celery's pools) are signalled as one group: the group of *our* child's pid, never
processes found by name, which other sessions on the machine may share.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        cwd: Path | str | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log_path = (log_dir / f"{name}.log") if log_dir else None
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> ManagedProcess:
        """Start; output goes to the log file when one was given, else to our own stdout."""
        if self.log_path:
            self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=self.cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return
            if self.returncode is not None:
                raise RuntimeError(f"{self.name} exited with {self.returncode}:\n{self.log_text()[-3000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: {needle!r} not seen in {timeout}s:\n{self.log_text()[-3000:]}")

    def group_pids(self) -> list[int]:
        """Our child and every process of its group (e.g. a prefork pool), from /proc."""
        if not self.proc:
            return []
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.getpgid(int(entry.name)) == self.proc.pid:
                        pids.append(int(entry.name))
                except (ProcessLookupError, PermissionError):
                    continue
        return pids

    def kill(self) -> None:
        """SIGKILL the whole group at once: a crash, with no chance to clean up."""
        if self.proc and self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 20.0) -> None:
        if not self.proc:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Children of the group that outlived their leader go too.
        _signal_group(self.proc.pid, signal.SIGKILL)
        if self._log:
            self._log.close()
            self._log = None


def peak_rss_bytes(pid: int) -> int:
    """The peak resident set size (VmHWM) of a live process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
