"""Counting error patterns in a host's log files, each line once, across rotation and truncation.

Each file is kept open between ticks. Reading from the open handle to its end first means
that after a rename-style rotation (logrotate's default, xrootd's own) the rest of the old
file is still read; then the path is stat'ed, and a new inode starts the new file at 0. A
file that got shorter than our offset was truncated (copytruncate): we start again at 0.
A collector that starts sees existing files from their end, so history is not counted again.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import BinaryIO

from django.conf import settings

# Sensible defaults for the failures storage people grep for; a log file's own "patterns"
# replace them.
DEFAULT_PATTERNS: dict[str, str] = {
    "checksum_error": r"(?i)checksum\W*(?:mismatch|error|fail|differ)|(?:adler32|md5|crc32c?)\W.*mismatch",
    "timeout": r"(?i)\btime[d ]?\s?-?out\b|\btimeout\b",
    "http_5xx": r'(?i)\bHTTP/\d(?:\.\d)?"?\s+5\d\d\b|\b(?:status|code|response)\W{0,3}5\d\d\b|"\s5\d\d\s',
    "out_of_memory": r"(?i)out of memory|\boom[- ]?kill|cannot allocate memory|std::bad_alloc|MemoryError",
    "tpc_failure": r"(?i)\b(?:tpc|third[- ]party)\b.*\b(?:fail\w*|error|abort\w*|refused)\b",
}
MAX_READ_PER_TICK = 64 * 1024 * 1024  # a runaway log must not stall the tick
BURST_LINES = 10  # first lines of a burst kept in the event


def burst_threshold() -> int:
    return int(getattr(settings, "STORAGEOPS_LOG_BURST_THRESHOLD", 20))


@dataclass
class TickResult:
    counts: Counter = field(default_factory=Counter)  # pattern -> matching lines this tick
    first_lines: dict[str, list[str]] = field(default_factory=dict)  # pattern -> first lines
    files: dict[str, Counter] = field(default_factory=dict)  # pattern -> {path: lines}


class _TailedFile:
    def __init__(self, path: str, patterns: dict[str, re.Pattern]) -> None:
        self.path = path
        self.patterns = patterns
        self.handle: BinaryIO | None = None
        self.inode: tuple[int, int] | None = None
        self.partial = b""
        self.seen = False  # first tick: existing content is history, not news

    def _open(self, from_start: bool) -> None:
        self.close()
        try:
            self.handle = open(self.path, "rb")  # noqa: SIM115 -- kept open across ticks on purpose
        except OSError:
            self.handle = None
            return
        st = os.fstat(self.handle.fileno())
        self.inode = (st.st_dev, st.st_ino)
        self.partial = b""
        if not from_start:
            self.handle.seek(0, os.SEEK_END)

    def close(self) -> None:
        if self.handle:
            self.handle.close()
        self.handle = None

    def poll(self, result: TickResult) -> None:
        if not self.seen:
            self.seen = True
            self._open(from_start=False)
            return
        if self.handle is not None:
            self._consume(result)  # the rest of the file we have open, rotated or not
            try:
                st = os.stat(self.path)
            except OSError:
                return  # rotated away and not yet re-created: keep the old handle
            if (st.st_dev, st.st_ino) != self.inode:
                self._flush_partial(result)
                self._open(from_start=True)
                self._consume(result)
            elif st.st_size < self.handle.tell():
                # Truncated in place: everything now in the file was written after it.
                self.partial = b""
                self.handle.seek(0)
                self._consume(result)
        else:
            self._open(from_start=True)  # appeared after the collector started
            if self.handle is not None:
                self._consume(result)

    def _consume(self, result: TickResult) -> None:
        assert self.handle is not None
        data = self.handle.read(MAX_READ_PER_TICK)
        if not data:
            return
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()  # an unfinished line waits for its newline
        for raw in lines:
            self._count(raw, result)

    def _flush_partial(self, result: TickResult) -> None:
        if self.partial:
            self._count(self.partial, result)
            self.partial = b""

    def _count(self, raw: bytes, result: TickResult) -> None:
        line = raw.decode(errors="replace")
        for name, pattern in self.patterns.items():
            if pattern.search(line):
                result.counts[name] += 1
                result.files.setdefault(name, Counter())[self.path] += 1
                first = result.first_lines.setdefault(name, [])
                if len(first) < BURST_LINES:
                    first.append(f"{self.path}: {line[:500]}")


class LogTailer:
    """All configured log files of one host; ``poll()`` once per tick."""

    def __init__(self, log_files: list[dict]) -> None:
        self.files: list[_TailedFile] = []
        self.pattern_names: list[str] = []
        for item in log_files:
            patterns = item.get("patterns") or DEFAULT_PATTERNS
            compiled = {name: re.compile(regex) for name, regex in patterns.items()}
            self.files.append(_TailedFile(item["path"], compiled))
            self.pattern_names += [n for n in compiled if n not in self.pattern_names]

    def poll(self) -> TickResult:
        result = TickResult()
        for tailed in self.files:
            tailed.poll(result)
        return result

    def close(self) -> None:
        for tailed in self.files:
            tailed.close()
