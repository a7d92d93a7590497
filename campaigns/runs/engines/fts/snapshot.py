"""What a run freezes of its FTS instance (the engine's snapshot extras), and how the executor
reads it back: how the instance was reached, never its secrets."""

from __future__ import annotations

from dataclasses import dataclass, fields

from campaigns.runs.engines.fts.models import FtsInstance


def fts_snapshot(instance: FtsInstance) -> dict:
    """The FTS instance as the run used it: how it was reached, never its secrets."""
    return {
        "id": instance.pk,
        "name": instance.name,
        "url": instance.url,
        "auth": instance.auth_kind,
        "verify_tls": instance.verify_tls,
        "files_per_job": instance.files_per_job,
        "manage_link_limits": instance.manage_link_limits,
        "poll_seconds": instance.poll_seconds,
    }


@dataclass(frozen=True, slots=True)
class FtsSpec:
    """How the run reached its FTS instance (the snapshot's "fts" section)."""

    id: int | None = None
    name: str = ""
    url: str = ""
    auth: str = ""
    verify_tls: bool = True
    files_per_job: int = 100
    manage_link_limits: bool = False
    poll_seconds: float = 2.0

    @classmethod
    def from_snapshot(cls, snapshot: dict) -> FtsSpec:
        # A snapshot of an older release may hold keys this one no longer reads.
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (snapshot.get("fts") or {}).items() if k in known})
