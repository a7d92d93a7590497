"""A test OAuth2 token issuer for storage tokens (the WLCG JWT profile), over HTTPS.

A double of a site's IAM for the one flow StorageOps uses to get storage tokens: the
``client_credentials`` grant, a client id and secret (HTTP basic or form fields), a ``scope`` of
``storage.read:/path``-style scopes and an ``audience``. It answers with a signed RS256 JWT
carrying ``iss``, ``sub``, ``aud``, ``scope``, ``wlcg.ver``, ``iat``, ``nbf``, ``exp`` and
``jti``, and publishes its key at ``/.well-known/openid-configuration`` → ``jwks_uri``, which is
what a door's SciTokens plugin (scitokens-cpp) fetches to check the signature. It serves HTTPS
with a host certificate of the test CA (devsite.xrootd_server.make_test_ca): scitokens-cpp
accepts only ``https://`` issuers.

The doors that check its tokens are real (Debian's xrootd-scitokens-plugins); only the issuer is
ours. It grants any scope asked of it to its one client, as an IAM admin who gave the client
every storage scope would: what the tokens may do is decided by the door, not here.

    .venv/bin/python -m devsite.token_issuer --ca var/demo/ca [--lifetime 1200]
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from devsite.xrootd_server import LOOPBACK, TestCA, make_test_ca

CLIENT_ID = "storageops"
KEY_ID = "storageops-test-issuer"
#: Seconds a token lives unless the issuer is told otherwise (WLCG IAM's default is 20 minutes).
DEFAULT_LIFETIME = 1200
MAX_BODY = 64 << 10


@dataclass
class Issued:
    """What the issuer handed out: the tests' witness of renewals and of where tokens went."""

    scope: str
    audience: str
    issued_at: float
    expires_at: float
    signature: str  # the token's last part: what a test looks for in records and logs


@dataclass
class TokenIssuer:
    """The issuer's state: its key, its one client and what it issued; thread-safe."""

    ca: TestCA
    lifetime: int = DEFAULT_LIFETIME
    client_id: str = CLIENT_ID
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = 0
    issued: list[Issued] = field(default_factory=list)
    refused: int = 0

    def __post_init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The issuer, exactly as tokens' ``iss`` and the doors' configuration spell it."""
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"

    def metadata(self) -> dict:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "token_endpoint": self.token_endpoint,
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def jwks(self) -> dict:
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": KEY_ID,
                          "n": _b64_int(numbers.n), "e": _b64_int(numbers.e)}]}  # fmt: skip

    def mint(self, scope: str, audience: str, lifetime: int | None = None, subject: str | None = None) -> str:
        """A signed token; the tests also mint ones StorageOps would never ask for (a read-only
        token used for a write, a token for another path)."""
        now = int(time.time())
        lifetime = self.lifetime if lifetime is None else lifetime
        claims = {
            "iss": self.url, "sub": subject or self.client_id, "aud": audience, "scope": scope,
            "wlcg.ver": "1.0", "iat": now, "nbf": now, "exp": now + lifetime, "jti": str(uuid.uuid4()),
            "client_id": self.client_id,
        }  # fmt: skip
        token = jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": KEY_ID, "typ": "JWT"})
        with self._lock:
            self.issued.append(Issued(scope, audience, now, now + lifetime, token.rsplit(".", 1)[1]))
        return token

    def grant(self, form: dict[str, str], authorization: str) -> tuple[int, dict]:
        """The token endpoint's answer (status, body) to a client_credentials request."""
        client_id, secret = _client_of(form, authorization)
        if client_id != self.client_id or not secrets.compare_digest(secret, self.client_secret):
            with self._lock:
                self.refused += 1
            return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        scope = " ".join(form.get("scope", "").split())
        audience = form.get("audience", "") or "https://wlcg.cern.ch/jwt/v1/any"
        token = self.mint(scope, audience)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.lifetime, "scope": scope}

    # -- serving ---------------------------------------------------------------------------------
    def start(self, host: str = LOOPBACK) -> TokenIssuer:
        server = ThreadingHTTPServer((host, self.port), _handler(self))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca.host_cert, self.ca.host_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="token-issuer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def renewals(self, scope_part: str) -> list[Issued]:
        with self._lock:
            return [item for item in self.issued if scope_part in item.scope]


def _b64_int(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _client_of(form: dict[str, str], authorization: str) -> tuple[str, str]:
    if authorization.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeError):
            return "", ""
        client_id, _, secret = decoded.partition(":")
        return client_id, secret
    return form.get("client_id", ""), form.get("client_secret", "")


def _handler(issuer: TokenIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args) -> None:
            return  # a test's output stays quiet

        def _answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                self._answer(200, issuer.metadata())
            elif self.path == "/jwks":
                self._answer(200, issuer.jwks())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if self.path != "/token":
                self._answer(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._answer(413, {"error": "invalid_request"})
                return
            raw = self.rfile.read(length).decode("utf-8", "replace")
            form = {key: values[-1] for key, values in parse_qs(raw).items()}
            self._answer(*issuer.grant(form, self.headers.get("Authorization", "")))

    return Handler


@contextmanager
def running_issuer(ca: TestCA, lifetime: int = DEFAULT_LIFETIME) -> Iterator[TokenIssuer]:
    issuer = TokenIssuer(ca, lifetime=lifetime).start()
    try:
        yield issuer
    finally:
        issuer.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A test storage-token issuer (client_credentials, WLCG JWTs).")
    parser.add_argument("--ca", type=Path, required=True, help="the test CA's folder (made if missing)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=int, default=DEFAULT_LIFETIME, help="seconds a token lives")
    args = parser.parse_args(argv)
    issuer = TokenIssuer(make_test_ca(args.ca), lifetime=args.lifetime, port=args.port).start()
    print(f"Test token issuer up: {issuer.url}  token endpoint {issuer.token_endpoint}", flush=True)
    print(f"client id {issuer.client_id}, client secret {issuer.client_secret}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        issuer.stop()


if __name__ == "__main__":
    main()
