"""A real OpenID Connect provider for the tests: panva's oidc-provider (tests/support/oidc/provider.js)
in a node process on a free loopback port, started and stopped by pid (devsite.sso_provider starts
the same provider for a person trying sign-on on `make run`).

`scripts/bootstrap.sh test` installs it (npm ci). Its users sign in through its development
login form (any password); a test changes their groups through its loopback admin endpoint, as a
site's IAM administrator would. `access_token` gets a user's JWT access token for the API through
the real authorization code flow with PKCE, as a site's automation would.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlparse

import requests

from devsite.processes import ManagedProcess
from devsite.sso_provider import CLIENT_ID, ProviderNotInstalled, start_node_provider
from storageops.oidc.config import OidcConfig
from tests.support.ports import free_port

CLIENT_SECRET = "storageops-test-secret"
API_AUDIENCE = "http://storageops.test/api"
ROLE_MAP = {"viewer": ("/storage",), "operator": ("/storage/ops",), "admin": ("/storage/admins",)}


@dataclass
class TestProvider:
    process: ManagedProcess
    issuer: str
    redirect_uri: str

    def config(self, **overrides) -> OidcConfig:
        fields = {
            "issuer": self.issuer,
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "role_map": ROLE_MAP,
            "scopes": ("openid", "profile", "email", "groups"),
            "groups_claim": "groups",
            "provider_name": "Test IAM",
            "audience": API_AUDIENCE,
            "timeout": 3,
        }
        return OidcConfig(**{**fields, **overrides})

    def set_groups(self, login: str, groups: list[str]) -> None:
        response = requests.put(f"{self.issuer}/test-admin/accounts/{login}", json={"groups": groups}, timeout=10)
        assert response.status_code == 204, response.text

    def set_access_token_ttl(self, seconds: int) -> None:
        response = requests.put(f"{self.issuer}/test-admin/access-token-ttl", json={"seconds": seconds}, timeout=10)
        assert response.status_code == 204, response.text

    def access_token(self, login: str, resource: str = API_AUDIENCE) -> str:
        """A JWT access token for `resource`, through the provider's login form and token endpoint."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        browser = requests.Session()
        query = {
            "client_id": CLIENT_ID, "response_type": "code", "scope": "openid profile email groups",
            "redirect_uri": self.redirect_uri, "state": secrets.token_urlsafe(8), "nonce": secrets.token_urlsafe(8),
            "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource,
        }  # fmt: skip
        form = browser.get(f"{self.issuer}/auth", params=query, timeout=10)
        form.raise_for_status()
        action = re.search(r'<form[^>]*action="([^"]+)"', form.text)
        assert action, form.text[:2000]
        response = browser.post(
            urljoin(form.url, action.group(1)),
            data={"prompt": "login", "login": login, "password": "any"},
            allow_redirects=False,
            timeout=10,
        )
        # Follow the provider's own redirects, and stop at ours: the code is in its query.
        for _ in range(10):
            location = urljoin(response.url, response.headers["Location"])
            if location.startswith(self.redirect_uri):
                break
            response = browser.get(location, allow_redirects=False, timeout=10)
        else:
            raise AssertionError(f"the provider never redirected back: {response.status_code} {response.text[:500]}")
        code = parse_qs(urlparse(location).query)["code"][0]
        grant = {
            "grant_type": "authorization_code", "code": code, "redirect_uri": self.redirect_uri,
            "code_verifier": verifier, "resource": resource,
        }  # fmt: skip
        token = requests.post(f"{self.issuer}/token", auth=(CLIENT_ID, CLIENT_SECRET), data=grant, timeout=10)
        assert token.status_code == 200, token.text
        return token.json()["access_token"]

    def stop(self) -> None:
        self.process.stop(timeout=5)


def start_provider(
    log_dir: Path, redirect_uri: str, accounts: dict[str, dict], post_logout_uri: str = ""
) -> TestProvider:
    port = free_port()
    try:
        process = start_node_provider(
            port, CLIENT_SECRET, [redirect_uri], [post_logout_uri] if post_logout_uri else [], accounts, log_dir
        )
    except ProviderNotInstalled as exc:
        raise RuntimeError(f"{exc}; or scripts/bootstrap.sh test") from None
    return TestProvider(process=process, issuer=f"http://127.0.0.1:{port}", redirect_uri=redirect_uri)
