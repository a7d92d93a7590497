"""A test OpenID provider to try single sign-on on `make run`: the provider the tests use
(panva's oidc-provider, tests/support/oidc/provider.js) on a free loopback port, with a few
demo users, printing the variables StorageOps needs (docs/security.md, "Try it on make run").

    make sso-provider                                    # or: .venv/bin/python -m devsite.sso_provider
    .venv/bin/python -m devsite.sso_provider groups alice /storage   # change a user's groups at it

It writes the variables to <var>/sso-provider.env too (mode 0600): `. var/sso-provider.env` in the
terminal of `make run`, before starting it. Ctrl-C stops the provider. It is a
development provider: any password signs a user in, and it listens on loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import requests

from devsite.processes import ManagedProcess, set_parent_death_signal
from devsite.xrootd_server import free_port

ROOT = Path(__file__).resolve().parent.parent
PROVIDER_DIR = ROOT / "tests" / "support" / "oidc"
CLIENT_ID = "storageops"
PROVIDER_NAME = "Test IAM"
SCOPES = "openid profile email groups"
GROUPS_CLAIM = "groups"
ROLE_MAP = "viewer=/storage,operator=/storage/ops,admin=/storage/admins"
#: login -> groups; any password signs them in.
DEMO_ACCOUNTS: dict[str, list[str]] = {
    "alice": ["/storage", "/storage/ops"],  # viewer and operator
    "victor": ["/storage"],  # viewer
    "ada": ["/storage/admins"],  # admin
    "nobody": ["/elsewhere"],  # signed in, no role
}
ENV_FILE_NAME = "sso-provider.env"


class ProviderNotInstalled(RuntimeError):
    pass


def var_dir() -> Path:
    return Path(os.environ.get("STORAGEOPS_VAR_DIR") or ROOT / "var")


def site_urls(bind: str) -> list[str]:
    """The addresses a browser may use for a site bound at `bind` (a redirect URI must match the
    one StorageOps sends exactly, and it sends the address the browser used)."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    if host in ("", "0.0.0.0", "127.0.0.1", "localhost", "::", "::1"):  # noqa: S104 -- names, not a bind
        return [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    return [f"http://{host}:{port}"]


def _shown_path(path: Path | str) -> str:
    """A path as a user in the checkout would type it."""
    # Not resolved: the virtual environment's python is a link to the system's.
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, Path.cwd())
    return absolute if relative.startswith("..") else relative


def start_node_provider(
    port: int,
    client_secret: str,
    redirect_uris: list[str],
    post_logout_uris: list[str],
    accounts: dict[str, dict],
    log_dir: Path,
    client_id: str = CLIENT_ID,
) -> ManagedProcess:
    """The node provider on 127.0.0.1:<port>, started and waited for (its "listening" line)."""
    node = shutil.which("node")
    if node is None or not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        raise ProviderNotInstalled(
            "the test OpenID provider is not installed: run `bash scripts/bootstrap.sh sso` "
            "(node >= 20 and npm; it runs npm ci in tests/support/oidc)"
        )
    env = {
        "PATH": "/usr/bin:/bin",
        "OIDC_PORT": str(port),
        "OIDC_CLIENT_ID": client_id,
        "OIDC_CLIENT_SECRET": client_secret,
        "OIDC_REDIRECT_URIS": ",".join(redirect_uris),
        "OIDC_POST_LOGOUT_REDIRECT_URIS": ",".join(post_logout_uris),
        "OIDC_ACCOUNTS": json.dumps(accounts),
    }
    log_dir.mkdir(parents=True, exist_ok=True)
    process = ManagedProcess(f"oidc-provider-{port}", [node, "provider.js"], env, log_dir, cwd=PROVIDER_DIR).start()
    try:
        process.wait_for_log("oidc-provider listening on", timeout=60)
    except BaseException:
        process.stop(timeout=5)
        raise
    return process


def settings_for(issuer: str, client_secret: str) -> dict[str, str]:
    """The STORAGEOPS_OIDC_* variables for this provider."""
    return {
        "STORAGEOPS_OIDC_ISSUER": issuer,
        "STORAGEOPS_OIDC_CLIENT_ID": CLIENT_ID,
        "STORAGEOPS_OIDC_CLIENT_SECRET": client_secret,
        "STORAGEOPS_OIDC_SCOPES": SCOPES,
        "STORAGEOPS_OIDC_GROUPS_CLAIM": GROUPS_CLAIM,
        "STORAGEOPS_OIDC_ROLE_MAP": ROLE_MAP,
        "STORAGEOPS_OIDC_PROVIDER_NAME": PROVIDER_NAME,
    }


def env_lines(variables: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]


def _serve(args: argparse.Namespace) -> int:
    sites = [url.rstrip("/") for url in args.site] if args.site else site_urls(args.bind)
    port = args.port or free_port()
    issuer = f"http://127.0.0.1:{port}"
    secret = secrets.token_urlsafe(24)
    accounts = {login: {"groups": groups, "email": f"{login}@example.org"} for login, groups in DEMO_ACCOUNTS.items()}
    base = var_dir()
    try:
        process = start_node_provider(
            port,
            secret,
            redirect_uris=[f"{site}/oidc/callback/" for site in sites],
            post_logout_uris=[f"{site}/login/" for site in sites],
            accounts=accounts,
            log_dir=base / "sso-provider",
        )
    except (ProviderNotInstalled, RuntimeError, TimeoutError) as exc:
        print(f"The test provider did not start: {exc}", file=sys.stderr)
        return 1
    variables = settings_for(issuer, secret)
    env_file = base / ENV_FILE_NAME
    with os.fdopen(os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write("# The test OpenID provider's settings (devsite.sso_provider); valid while it runs.\n")
        out.write("\n".join(env_lines(variables)) + "\n")
    env_file.chmod(0o600)
    users = ", ".join(f"{login} ({', '.join(groups)})" for login, groups in DEMO_ACCOUNTS.items())
    log = _shown_path(process.log_path)
    print(
        f"Test OpenID provider ({PROVIDER_NAME}) is up: {issuer}   Ctrl-C stops it (log: {log}).\n"
        f"Its users, any password: {users}.\n"
        f"Registered redirect URIs: {', '.join(f'{s}/oidc/callback/' for s in sites)}\n"
        f"\nIn the terminal of `make run`, before starting it, set (or: . {_shown_path(env_file)}):\n"
        + "\n".join(env_lines(variables))
        + "\n\nChange a user's groups (as the site's IAM admin would): "
        f"{_shown_path(sys.executable)} -m devsite.sso_provider groups alice /storage\n",
        flush=True,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.is_set() and process.returncode is None:
        stop.wait(0.5)
    code = process.returncode
    process.stop(timeout=5)
    env_file.unlink(missing_ok=True)
    if code is not None:
        print(f"The test provider exited with {code}; its log: {process.log_path}", file=sys.stderr)
        return 1
    print("Test provider stopped.")
    return 0


def _issuer_from_env_file() -> str:
    issuer = os.environ.get("STORAGEOPS_OIDC_ISSUER", "")
    env_file = var_dir() / ENV_FILE_NAME
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            if name == "STORAGEOPS_OIDC_ISSUER":
                issuer = shlex.split(value)[0]
    return issuer


def set_groups(issuer: str, login: str, groups: list[str]) -> None:
    """Change a user's groups at the running test provider (its loopback admin endpoint)."""
    if urlsplit(issuer).hostname != "127.0.0.1":
        raise ValueError(f"{issuer} is not the test provider (it listens on 127.0.0.1)")
    response = requests.put(f"{issuer}/test-admin/accounts/{login}", json={"groups": groups}, timeout=10)
    if response.status_code != 204:
        raise RuntimeError(f"the provider answered {response.status_code} {response.text[:200]}")


def _groups(args: argparse.Namespace) -> int:
    issuer = args.issuer or _issuer_from_env_file()
    if not issuer:
        print(f"No running test provider found ({var_dir() / ENV_FILE_NAME}); give --issuer.", file=sys.stderr)
        return 1
    try:
        set_groups(issuer, args.login, args.group)
    except (requests.RequestException, ValueError, RuntimeError) as exc:
        print(f"Could not change {args.login}'s groups at {issuer}: {exc}", file=sys.stderr)
        return 1
    print(f"{args.login}'s groups at {issuer}: {', '.join(args.group) or '(none)'}; they apply at the next sign-in.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devsite.sso_provider", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bind",
        default=os.environ.get("STORAGEOPS_BIND", "127.0.0.1:8000"),
        help="where `make run` listens (STORAGEOPS_BIND): its redirect URIs are registered",
    )
    parser.add_argument("--site", action="append", help="a site address to register instead (repeatable)")
    parser.add_argument("--port", type=int, default=0, help="the provider's port (default: a free one)")
    parser.add_argument(
        "--exit-with-parent", action="store_true", help="stop (as on SIGTERM) when the parent process (make) dies"
    )
    sub = parser.add_subparsers(dest="command")
    groups = sub.add_parser("groups", help="change a user's groups at the running test provider")
    groups.add_argument("login")
    groups.add_argument("group", nargs="*", help="the user's groups from now on (none: no group)")
    groups.add_argument("--issuer", help="the provider (default: from <var>/sso-provider.env)")
    args = parser.parse_args(argv)
    if args.exit_with_parent:
        set_parent_death_signal(signal.SIGTERM)
    return _groups(args) if args.command == "groups" else _serve(args)


if __name__ == "__main__":
    sys.exit(main())
