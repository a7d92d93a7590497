"""What a campaign's engine allows of it, asked of the engine registry: each engine names
its own checks (campaigns.models.engine_registry); these are the ones every engine shares."""

from __future__ import annotations

from django.core.exceptions import ValidationError

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
