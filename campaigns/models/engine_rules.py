"""What a campaign run by FTS may not ask for: FTS's own scheduler decides how copies run."""

from __future__ import annotations

from campaigns import choices


def fts_errors(campaign) -> dict[str, str]:
    """Field errors of an FTS campaign's settings that only the gfal2 engine can honour."""
    if campaign.engine != choices.Engine.FTS:
        return {}
    errors: dict[str, str] = {}
    if campaign.tpc_mode == choices.TpcMode.STREAMED:
        errors["tpc_mode"] = "FTS does third-party copies; streamed mode needs the gfal2 engine."
    if campaign.start_together:
        errors["start_together"] = "FTS's scheduler starts copies itself: starting together needs the gfal2 engine."
    if not campaign.fts_instance_id:
        errors["fts_instance"] = "Choose the FTS instance that runs this campaign's transfers."
    return errors


def client_pool_error(engine: str, clients) -> str | None:
    """A client pool spreads gfal2 copies over client hosts; FTS spreads its own over its nodes."""
    if engine == choices.Engine.FTS and clients:
        return "FTS runs the copies on its own nodes: a client pool needs the gfal2 engine."
    hosts = [c for c in clients or () if getattr(c, "role", "client") != "client"]
    if hosts:
        names = ", ".join(h.name for h in hosts)
        return f"Only client hosts (role client) can be in a pool, not {names}."
    return None
