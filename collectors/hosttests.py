"""Host tests: fio or dd in the host's test directory, with every parameter whitelisted.

A host test is started from the control plane and runs on the storage host, as the
collector's user. Nothing from the request reaches a shell: parameters are checked against
fixed types and ranges, turned into an argument list here, and the file they write must
resolve inside ``STORAGEOPS_HOST_TEST_DIR``. Anything else is a ValidationError raised
before a process is started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from collectors.events import log_event
from collectors.models import Host, MetricSample
from storageops import paths

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TOOLS = ("fio", "dd")
RW_MODES = ("read", "write", "randread", "randwrite", "readwrite", "randrw")
IO_ENGINES = ("psync", "libaio", "io_uring")
MAX_BLOCK = 256 << 20  # dd and fio take any block size; more than this buffers more than it measures
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_BYTES_RE = re.compile(r"^(\d{1,15})\s*([kmgt]?)(i?b)?$", re.I)
MAX_SIZE = 1 << 40  # 1 TiB: a sanity cap, the directory's free space is the real one
MAX_RUNTIME = 3600
_ALLOWED = {"tool", "name", "subdir", "size", "block_size", "rw", "iodepth", "numjobs", "ioengine", "direct", "runtime"}


def host_test_root() -> Path:
    configured = getattr(settings, "STORAGEOPS_HOST_TEST_DIR", None) or os.environ.get("STORAGEOPS_HOST_TEST_DIR")
    return Path(configured) if configured else Path(settings.VAR_DIR) / "hosttests"


@dataclass(frozen=True)
class HostTestParams:
    tool: str
    name: str
    directory: Path
    size: int
    block_size: int
    rw: str
    iodepth: int
    numjobs: int
    ioengine: str
    direct: bool
    runtime: int | None

    def as_dict(self) -> dict:
        return {**self.__dict__, "directory": str(self.directory)}


def _int(params: dict, key: str, default: int | None, low: int, high: int) -> int | None:
    value = params.get(key, default)
    if value is None:
        return None
    # bool is an int in Python; "4" or 4.0 are not accepted either: types are exact.
    if type(value) is not int or not low <= value <= high:
        raise ValidationError(f"{key} must be an integer between {low} and {high}, not {value!r}.")
    return value


def _choice(params: dict, key: str, default: str, allowed: tuple) -> str:
    value = params.get(key, default)
    if value not in allowed:
        raise ValidationError(f"{key} must be one of {', '.join(map(str, allowed))}, not {value!r}.")
    return value


def parse_bytes(value: object, key: str, low: int, high: int) -> int:
    """Bytes as dd and fio take them: 4096, "4k", "10M", "1G" (binary multiples, as both tools
    read them); bounds inclusive. ValidationError naming the field otherwise."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and (match := _BYTES_RE.fullmatch(value.strip())):
        number = int(match[1]) * _UNITS[match[2].lower()]
    else:
        raise ValidationError(f"{key} must be a number of bytes such as 4096, 4k, 10M or 1G, not {value!r}.")
    if not low <= number <= high:
        raise ValidationError(f"{key} must be between {low} and {high} bytes, not {number}.")
    return number


def validate_params(params: dict) -> HostTestParams:
    """The only way from a request to a host test; raises ValidationError on anything odd."""
    if not isinstance(params, dict):
        raise ValidationError("Host test parameters must be an object.")
    unknown = set(params) - _ALLOWED
    if unknown:
        raise ValidationError(f"Unknown host test parameters: {', '.join(sorted(map(str, unknown)))}.")
    tool = _choice(params, "tool", "fio", TOOLS)
    name = params.get("name", "hosttest")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValidationError("name may only contain letters, digits, '_' and '-' (at most 64).")
    root = host_test_root().resolve()
    subdir = params.get("subdir", "")
    if not isinstance(subdir, str) or (subdir and not all(NAME_RE.fullmatch(p) for p in subdir.split("/"))):
        raise ValidationError("subdir must be a relative path of names made of letters, digits, '_' and '-'.")
    directory = (root / subdir).resolve()
    try:
        paths.confine_local(str(directory), str(root))  # the one path rule (storageops.paths)
    except paths.PathRefused as exc:
        raise ValidationError(f"subdir: the test directory must be inside {root}: {' '.join(exc.messages)}") from None
    rw = _choice(params, "rw", "write", RW_MODES)
    if tool == "dd" and rw not in ("read", "write"):
        raise ValidationError("dd only does sequential read or write.")
    block_size = parse_bytes(params.get("block_size", 1 << 20), "block_size", 1, MAX_BLOCK)
    size = parse_bytes(params.get("size", 64 << 20), "size", block_size, MAX_SIZE)
    direct = params.get("direct", False)
    if not isinstance(direct, bool):
        raise ValidationError("direct must be true or false.")
    if direct and block_size % 512:
        raise ValidationError("With direct I/O the block size must be a multiple of 512 bytes (the device's sectors).")
    return HostTestParams(
        tool=tool,
        name=name,
        directory=directory,
        size=size,
        block_size=block_size,
        rw=rw,
        iodepth=_int(params, "iodepth", 1, 1, 256),
        numjobs=_int(params, "numjobs", 1, 1, 64),
        ioengine=_choice(params, "ioengine", "psync", IO_ENGINES),
        direct=direct,
        runtime=_int(params, "runtime", None, 1, MAX_RUNTIME),
    )


# --------------------------------------------------------------------------- running


def fio_argv(p: HostTestParams) -> list[str]:
    argv = [
        shutil.which("fio") or "fio",
        f"--name={p.name}",
        f"--directory={p.directory}",
        f"--size={p.size}",
        f"--bs={p.block_size}",
        f"--rw={p.rw}",
        f"--iodepth={p.iodepth}",
        f"--numjobs={p.numjobs}",
        f"--ioengine={p.ioengine}",
        f"--direct={int(p.direct)}",
        "--group_reporting",
        "--unlink=1",  # the test leaves no data behind
        "--output-format=json",
    ]
    if p.rw in ("write", "randwrite", "readwrite", "randrw"):
        argv.append("--end_fsync=1")  # count the flush, not just the page cache
    if p.runtime:
        argv += [f"--runtime={p.runtime}", "--time_based"]
    return argv


def parse_fio(output: str) -> dict[str, float]:
    # fio may print warnings before the JSON document.
    report = json.loads(output[output.index("{") :])
    job = report["jobs"][0]
    result: dict[str, float] = {}
    for side in ("read", "write"):
        stats = job.get(side) or {}
        if not stats.get("io_bytes"):
            continue
        result[f"{side}_bps"] = float(stats["bw_bytes"])
        result[f"{side}_iops"] = float(stats["iops"])
        result[f"{side}_lat_ms"] = float(stats["lat_ns"]["mean"]) / 1e6
    return result


def parse_fio_full(output: str) -> dict[str, float]:
    """parse_fio's figures and the completion-latency percentiles fio reports (p50, p99)."""
    result = parse_fio(output)
    job = json.loads(output[output.index("{") :])["jobs"][0]
    for side in ("read", "write"):
        percentiles = ((job.get(side) or {}).get("clat_ns") or {}).get("percentile") or {}
        if (job.get(side) or {}).get("io_bytes") and percentiles:
            result["lat_p50_ms"] = float(percentiles.get("50.000000", 0)) / 1e6
            result["lat_p99_ms"] = float(percentiles.get("99.000000", 0)) / 1e6
    return result


_DD_RE = re.compile(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", re.M)


def parse_dd(stderr: str, block_size: int, side: str) -> dict[str, float]:
    match = _DD_RE.search(stderr)
    if not match:
        raise RuntimeError(f"dd printed no summary: {stderr[-500:]}")
    moved, seconds = int(match[1]), max(float(match[2]), 1e-9)
    blocks = max(moved // block_size, 1)
    return {f"{side}_bps": moved / seconds, f"{side}_iops": blocks / seconds, f"{side}_lat_ms": seconds / blocks * 1000}


def run_argv(argv: list[str], timeout: float = MAX_RUNTIME + 600) -> subprocess.CompletedProcess:
    """Run a validated argument list (never a shell); RuntimeError with the tool's words if it fails."""
    return _run(argv, timeout)


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def _run_dd(p: HostTestParams, timeout: float) -> dict[str, float]:
    dd = shutil.which("dd") or "dd"
    target = p.directory / f"{p.name}.dd"
    count = p.size // p.block_size
    oflag = ["oflag=direct"] if p.direct else []
    write = [dd, "if=/dev/zero", f"of={target}", f"bs={p.block_size}", f"count={count}", "conv=fdatasync", *oflag]
    try:
        if p.rw == "write":
            return parse_dd(_run(write, timeout).stderr, p.block_size, "write")
        _run(write, timeout)  # something to read back
        iflag = ["iflag=direct"] if p.direct else []
        read = [dd, f"if={target}", "of=/dev/null", f"bs={p.block_size}", *iflag]
        return parse_dd(_run(read, timeout).stderr, p.block_size, "read")
    finally:
        target.unlink(missing_ok=True)


def run_host_test(host: Host, params: dict, timeout: float = MAX_RUNTIME + 600) -> dict:
    """Validate, run, store samples ``hosttest.<side>_<what>`` (label = test name) and a note."""
    p = validate_params(params)
    p.directory.mkdir(parents=True, exist_ok=True)
    started = timezone.now()
    figures = parse_fio(_run(fio_argv(p), timeout).stdout) if p.tool == "fio" else _run_dd(p, timeout)
    now = timezone.now()
    MetricSample.objects.bulk_create(
        [MetricSample(host=host, metric=f"hosttest.{k}", label=p.name, time=now, value=v) for k, v in figures.items()]
    )
    summary_parts = []
    for side in ("read", "write"):
        if f"{side}_bps" in figures:
            summary_parts.append(
                f"{side} {figures[f'{side}_bps'] / 1e6:.1f} MB/s, {figures[f'{side}_iops']:.0f} IOPS, "
                f"{figures[f'{side}_lat_ms']:.3f} ms"
            )
    log_event(
        "note",
        f"host test {p.name} ({p.tool} {p.rw}, bs {p.block_size}): " + "; ".join(summary_parts),
        source="collector",
        host=host,
        time=now,
        detail=json.dumps({"params": p.as_dict(), "results": figures, "started": started.isoformat()}, indent=1),
    )
    return {"params": p.as_dict(), "results": figures}
