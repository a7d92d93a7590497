"""Single sign-on through the site's OpenID Connect provider (INDIGO IAM, Keycloak, CERN SSO).

config: the settings read from the environment; discovery: the provider's metadata, fetched
with a timeout and cached; claims: the one mapping from a token's groups to StorageOps' roles;
accounts: the local user of a provider identity and its roles; backend and views: the browser's
authorization code flow (mozilla-django-oidc, with PKCE); bearer: the API's check of the
provider's JWT access tokens.

Nothing here runs when STORAGEOPS_OIDC_ISSUER is unset (settings.STORAGEOPS_OIDC is None).
"""
