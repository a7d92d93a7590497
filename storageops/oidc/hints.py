"""What the 403 pages tell a user signed in through the provider: which groups to ask for.

Roles follow the provider's groups, so a role given by a StorageOps admin would be taken away at
the next sign-in: the way to a role is the site's identity administrators.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from storageops.oidc.claims import groups_to_ask_for
from storageops.oidc.config import SESSION_ISSUER


def groups_hint(request: HttpRequest) -> str | None:
    """None unless this session was signed in by the configured provider."""
    cfg = settings.STORAGEOPS_OIDC
    stored = getattr(request, "session", None)  # Django's session, not an HTTP one
    if cfg is None or stored is None or stored.get(SESSION_ISSUER) != cfg.issuer:
        return None
    wanted = " or ".join(f"{group} ({role})" for role, group in groups_to_ask_for(cfg))
    return (
        f"Your roles come from your groups at {cfg.provider_name}: ask your site's identity administrators "
        f"to add you to {wanted}, then sign in again."
    )
