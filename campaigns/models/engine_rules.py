"""What a campaign's engine allows of it, asked of the engine registry: each engine names
its own checks (campaigns.models.engine_registry); these are the ones every engine shares."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from campaigns import choices
from campaigns.models.engine_registry import clean_options, engine, registered


def engine_errors(campaign) -> dict[str, str]:
    """Field errors of a campaign's settings its engine cannot honour (Campaign.clean). An
    engine that is not registered is the engine field's own error (its choices say so)."""
    if not any(entry.name == campaign.engine for entry in registered()):
        return {}
    errors: dict[str, str] = {}
    try:
        # Kept as the schema cleaned them: JSON values, defaults filled in.
        campaign.engine_options = clean_options(campaign.engine, campaign.engine_options)
    except ValidationError as exc:
        errors["engine_options"] = " ".join(exc.messages)
    return {**engine(campaign.engine).campaign_errors(campaign), **errors}


def client_pool_error(engine_name: str, clients) -> str | None:
    """A client pool spreads gfal2 copies over client hosts; FTS spreads its own over its nodes."""
    if clients and any(e.name == engine_name and not e.client_pool for e in registered()):
        label = engine(engine_name).label
        return f"{label} runs the copies on its own nodes: a client pool needs an engine that copies here (gfal2)."
    hosts = [c for c in clients or () if getattr(c, "role", "client") != "client"]
    if hosts:
        names = ", ".join(h.name for h in hosts)
        return f"Only client hosts (role client) can be in a pool, not {names}."
    return None


def copy_mode_error(
    engine_name: str, kind: str, tpc_mode: str, sweep, direction: str, sources, destinations
) -> str | None:
    """Why the campaign's engine cannot copy from its sources to its destinations in the copy
    modes it asks for (its tpc_mode and any swept one), or None. The model (once saved), the
    form and the API ask it, each with the endpoints it has; the engine says what its copies
    can be (EngineEntry.copy_mode_error), so a campaign never records a mode it did not ask for."""
    entry = next((e for e in registered() if e.name == engine_name), None)
    if entry is None or entry.copy_mode_error is None or kind != choices.CampaignKind.TRANSFER:
        return None
    modes = {tpc_mode}
    if isinstance(sweep, dict) and isinstance(sweep.get("tpc_mode"), list):
        modes.update(m for m in sweep["tpc_mode"] if isinstance(m, str))
    forward = [(s.url, d.url) for s in sources for d in destinations]
    pairs = {
        choices.Direction.FORWARD: forward,
        choices.Direction.REVERSE: [(d, s) for s, d in forward],
        choices.Direction.BOTH: forward + [(d, s) for s, d in forward],
    }.get(direction, forward)
    return entry.copy_mode_error(modes, pairs)
