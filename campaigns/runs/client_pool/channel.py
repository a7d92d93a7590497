"""The Redis keys a run's driver and its clients share, and how jobs and results travel.

Per drive (a run's driver id, so a resumed drive never reads what an earlier one left):

- ``…:driver``: set by the driver with a short expiry while it drives; a client whose driver
  is gone stops, aborts its copies and ends its serve task.
- ``…:c:NAME:jobs``: the jobs handed to a client, a list; the client pops one only when a
  copy thread of its is free, so everything still in the list is unstarted and the driver can
  take it back atomically (a timed step's end, a stop, a client lost).
- ``…:c:NAME:control``: a hash the driver writes: the client's share of the step
  (concurrency), its step, the start-together gate, and the stop and abort words.
- ``…:c:NAME:alive``: set by the client with a short expiry every beat: a SIGKILLed client's
  key expires and the driver re-plans its share. Expiry, not timestamps: client clocks may differ.
- ``…:c:NAME:state``: what the client reports each beat: copies under way (id, start), those
  held at the gate, its CPU seconds and its interfaces' byte counters.
- ``…:results``: finished copies from every client, a list the driver drains and records.
- ``…:epoch``: set by the driver when it joins; found missing, it tells the driver the broker
  restarted empty (every list, hash and beat above gone with it), and the driver rebuilds.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from urllib.parse import urlsplit

import redis
from django.conf import settings
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from campaigns.runs.engines.copies import CopyJob, CopyOptions, CopyResult

ALIVE_SECONDS = 5.0  # a client not heard of for this long is lost
BEAT_SECONDS = 0.5
DRIVER_SECONDS = 15.0  # a driver not heard of for this long is gone: its clients stop
KEY_TTL = 24 * 3600  # every key of a drive expires at last, whatever became of it


class PoolUnavailable(Exception):
    """The broker is not Redis, or cannot be reached: no client can be told anything."""


def connect() -> redis.Redis:
    url = settings.CELERY_BROKER_URL
    if urlsplit(url).scheme not in ("redis", "rediss"):
        raise PoolUnavailable(f"a client pool talks through a Redis broker; the broker is {urlsplit(url).scheme}://")
    # A broker restarted under a run (seconds) is waited for, not taken for the end of the run.
    retry = Retry(ExponentialBackoff(cap=2.0, base=0.1), retries=20)
    return redis.Redis.from_url(
        url, socket_timeout=10, socket_connect_timeout=5, health_check_interval=30, retry=retry,
        retry_on_error=[redis.ConnectionError, redis.TimeoutError],
    )  # fmt: skip


class Keys:
    def __init__(self, run_id: int, drive: str) -> None:
        self.base = f"storageops:pool:{run_id}:{drive}"

    @property
    def driver(self) -> str:
        return f"{self.base}:driver"

    @property
    def results(self) -> str:
        return f"{self.base}:results"

    @property
    def epoch(self) -> str:
        return f"{self.base}:epoch"

    def jobs(self, client: str) -> str:
        return f"{self.base}:c:{client}:jobs"

    def control(self, client: str) -> str:
        return f"{self.base}:c:{client}:control"

    def alive(self, client: str) -> str:
        return f"{self.base}:c:{client}:alive"

    def state(self, client: str) -> str:
        return f"{self.base}:c:{client}:state"


def decoded(raw: dict[bytes, bytes]) -> dict[str, str]:
    """A hash as Redis gives it (bytes), as text."""
    return {k.decode(): v.decode() for k, v in raw.items()}


def encode_job(job: CopyJob) -> str:
    data = {k: getattr(job, k) for k in ("id", "index", "source", "destination", "size", "step", "attempt", "checksum")}
    data["options"] = asdict(job.options) if job.options is not None else None
    return json.dumps(data)


def decode_job(text: str | bytes) -> CopyJob:
    data = json.loads(text)
    options = data.pop("options")
    return CopyJob(**data, options=CopyOptions(**options) if options else None)


def encode_result(result: CopyResult, client: str) -> str:
    fields = ("ok", "started", "finished", "duration", "code", "message", "category")
    data = {k: getattr(result, k) for k in fields}
    data.update(
        id=result.job.id,
        client=client,
        source_checksum=result.source_checksum,
        destination_checksum=result.destination_checksum,
        copy_mode=result.copy_mode,
    )
    return json.dumps(data)


def decode_result(text: str | bytes) -> dict:
    """A result as sent: the driver matches its id to the job it handed out before trusting it."""
    return json.loads(text)


def result_for(job: CopyJob, data: dict) -> CopyResult:
    return CopyResult(
        job,
        bool(data["ok"]),
        float(data["started"]),
        float(data["finished"]),
        float(data["duration"]),
        code=data.get("code"),
        message=str(data.get("message") or ""),
        category=str(data.get("category") or ""),
        source_checksum=str(data.get("source_checksum") or ""),
        destination_checksum=str(data.get("destination_checksum") or ""),
        copy_mode=str(data.get("copy_mode") or ""),
        host=str(data.get("client") or ""),
    )
