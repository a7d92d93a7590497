"""From a provider's claims to roles, and the settings read from the environment."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from storageops.oidc import config
from storageops.oidc.claims import groups_in, roles_for, roles_from_claims
from storageops.oidc.config import OidcConfig, parse_role_map

CFG = OidcConfig(
    issuer="https://iam.example.org/",
    client_id="storageops",
    client_secret="s",
    role_map=parse_role_map("viewer=/storage,operator=/storage/ops,admin=/storage/admins,viewer=urn:x:y"),
    groups_claim="wlcg.groups",
)


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"wlcg.groups": ["/storage", "/storage/ops"]}, {"viewer", "operator"}),  # WLCG profile
        ({"wlcg.groups": ["storage/admins"]}, {"admin"}),  # IAM's `groups` form, no leading slash
        ({"wlcg.groups": "/storage/ops"}, {"operator"}),  # Keycloak: one group as a plain string
        ({"wlcg.groups": ["/storage/ops/sub", "/storageops", "/Storage"]}, set()),  # no prefix or case games
        ({"wlcg.groups": ["urn:x:y"]}, {"viewer"}),  # an entitlement, compared as written
        ({"wlcg.groups": [17, None, {"a": 1}]}, set()),  # not strings: ignored
        ({"groups": ["/storage/ops"]}, set()),  # another claim than the configured one
        ({}, set()),
    ],
)
def test_groups_map_to_roles(claims, expected):
    assert roles_from_claims(claims, CFG) == expected


def test_groups_in_reads_lists_and_single_strings():
    assert groups_in({"g": [" /a ", "", "/b"]}, "g") == {"/a", "/b"}
    assert groups_in({"g": "/a"}, "g") == {"/a"}
    assert roles_for(["/storage/ops"], CFG) == {"operator"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "is empty"),
        ("operator", "is not role=group"),
        ("operator=", "is not role=group"),
        ("boss=/storage", "unknown role 'boss'"),
    ],
)
def test_a_bad_role_map_is_refused_naming_the_setting(raw, message):
    with pytest.raises(ImproperlyConfigured, match=message) as caught:
        parse_role_map(raw)
    assert "STORAGEOPS_OIDC_ROLE_MAP" in str(caught.value)


def test_from_env_unset_is_none(monkeypatch):
    monkeypatch.delenv("STORAGEOPS_OIDC_ISSUER", raising=False)
    assert config.from_env() is None


def test_from_env_reads_every_setting(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    env = {
        "STORAGEOPS_OIDC_ISSUER": "https://wlcg.cloud.cnaf.infn.it/",
        "STORAGEOPS_OIDC_CLIENT_ID": "so",
        "STORAGEOPS_OIDC_CLIENT_SECRET_FILE": str(secret),
        "STORAGEOPS_OIDC_SCOPES": "openid profile wlcg.groups",
        "STORAGEOPS_OIDC_GROUPS_CLAIM": "wlcg.groups",
        "STORAGEOPS_OIDC_ROLE_MAP": "operator=/storage/ops",
        "STORAGEOPS_OIDC_PROVIDER_NAME": "WLCG IAM",
        "STORAGEOPS_OIDC_ONLY": "true",
        "STORAGEOPS_OIDC_SESSION_MAX_AGE": "3600",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cfg = config.from_env()
    assert cfg.issuer == "https://wlcg.cloud.cnaf.infn.it/"  # kept exactly: tokens carry this string
    assert cfg.client_secret == "from-a-file"
    assert cfg.scopes == ("openid", "profile", "wlcg.groups")
    assert cfg.role_map == {"operator": ("/storage/ops",)}
    assert (cfg.provider_name, cfg.only, cfg.session_max_age, cfg.api_audience) == ("WLCG IAM", True, 3600, "so")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"STORAGEOPS_OIDC_ISSUER": "iam.example.org"}, "STORAGEOPS_OIDC_ISSUER=.* must be an http"),
        ({"STORAGEOPS_OIDC_CLIENT_ID": ""}, "STORAGEOPS_OIDC_CLIENT_ID must be set"),
        ({"STORAGEOPS_OIDC_CLIENT_SECRET": ""}, "STORAGEOPS_OIDC_CLIENT_SECRET"),
        ({"STORAGEOPS_OIDC_SCOPES": "profile email"}, "STORAGEOPS_OIDC_SCOPES=.* must include 'openid'"),
        ({"STORAGEOPS_OIDC_SESSION_MAX_AGE": "5"}, "STORAGEOPS_OIDC_SESSION_MAX_AGE=5 is below"),
    ],
)
def test_from_env_refuses_bad_values_naming_them(monkeypatch, overrides, message):
    env = {
        "STORAGEOPS_OIDC_ISSUER": "https://iam.example.org/",
        "STORAGEOPS_OIDC_CLIENT_ID": "so",
        "STORAGEOPS_OIDC_CLIENT_SECRET": "s",
        "STORAGEOPS_OIDC_ROLE_MAP": "viewer=/storage",
        **overrides,
    }
    monkeypatch.delenv("STORAGEOPS_OIDC_CLIENT_SECRET_FILE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        config.from_env()


def test_a_session_ends_when_the_provider_says_its_own_ends_sooner(settings):
    from storageops.oidc.backend import ProviderBackend

    settings.STORAGEOPS_OIDC = CFG  # session_max_age 8 h
    backend = ProviderBackend()
    backend.token_info = {"refresh_expires_in": 1800}  # Keycloak's SSO session
    assert backend.session_seconds() == 1800
    backend.token_info = {"refresh_expires_in": 10**6}
    assert backend.session_seconds() == 8 * 3600
    backend.token_info = {}
    assert backend.session_seconds() == 8 * 3600
