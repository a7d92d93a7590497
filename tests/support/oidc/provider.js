// A real OpenID Connect provider for the tests: panva's certified oidc-provider on loopback.
//
//   node provider.js   (configured from the environment, see below)
//
// OIDC_PORT            the loopback port; the issuer is http://127.0.0.1:<port>
// OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URIS, OIDC_POST_LOGOUT_REDIRECT_URIS (comma-separated)
// OIDC_ACCOUNTS        JSON {"<login>": {"groups": [...], "email": ..., "name": ...}}
// An authorization request that names a resource indicator (RFC 8707) gets a JWT access token
// with that audience: what automation sends to the API.
//
// Sign-in goes through the provider's development interactions (a login form; any password).
// The consent step is skipped: StorageOps is a first-party client, as at a site's IAM.
//
// A tiny admin interface on the same loopback port lets a test change what the provider knows,
// as a site's IAM admin would:
//   PUT /test-admin/accounts/<login>      body {"groups": [...]}   set a user's groups
//   PUT /test-admin/access-token-ttl      body {"seconds": N}      lifetime of the next JWT access tokens
import http from 'node:http';

import Provider from 'oidc-provider';

const env = (name, fallback) => process.env[name] ?? fallback;
const list = (value) => value.split(',').map((s) => s.trim()).filter(Boolean);

const port = Number(env('OIDC_PORT', '0'));
const issuer = `http://127.0.0.1:${port}`;
const accounts = JSON.parse(env('OIDC_ACCOUNTS', '{}'));
let accessTokenTTL = Number(env('OIDC_ACCESS_TOKEN_TTL', '600'));

const SCOPES = ['openid', 'profile', 'email', 'groups'];

const configuration = {
  clients: [{
    client_id: env('OIDC_CLIENT_ID', 'storageops'),
    client_secret: env('OIDC_CLIENT_SECRET', 'storageops-secret'),
    redirect_uris: list(env('OIDC_REDIRECT_URIS', '')),
    post_logout_redirect_uris: list(env('OIDC_POST_LOGOUT_REDIRECT_URIS', '')),
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  // A confidential client must send a PKCE challenge too, as StorageOps does.
  pkce: { required: () => true },
  scopes: SCOPES,
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Without a resource parameter: an opaque token for the userinfo endpoint (browser sign-in).
      defaultResource: (ctx, client, oneOf) => oneOf,
      useGrantedResource: () => true,
      // Any resource a client names gets a JWT for it; StorageOps accepts only its own (STORAGEOPS_OIDC_AUDIENCE).
      getResourceServerInfo: (ctx, resourceIndicator) => ({
        scope: 'openid profile email groups',
        audience: resourceIndicator,
        accessTokenFormat: 'jwt',
        accessTokenTTL,
      }),
    },
  },
  // The groups also travel in the API's JWT access tokens, as IAM's wlcg.groups do.
  extraTokenClaims: (ctx, token) => {
    if (token.kind !== 'AccessToken' || !token.resourceServer) return undefined;
    const account = accounts[token.accountId];
    return account ? { groups: account.groups ?? [], preferred_username: token.accountId } : undefined;
  },
  findAccount: (ctx, id) => {
    if (!Object.hasOwn(accounts, id)) return undefined;
    return {
      accountId: id,
      claims: () => {
        const account = accounts[id];
        return {
          sub: id,
          preferred_username: id,
          name: account.name ?? id,
          email: account.email ?? `${id}@example.org`,
          email_verified: true,
          groups: account.groups ?? [],
        };
      },
    };
  },
  // Skip consent: grant whatever the client asks for.
  loadExistingGrant: async (ctx) => {
    const grant = new ctx.oidc.provider.Grant({ accountId: ctx.oidc.session.accountId, clientId: ctx.oidc.client.clientId });
    grant.addOIDCScope(SCOPES.join(' '));
    grant.addOIDCClaims(['sub', 'name', 'preferred_username', 'email', 'email_verified', 'groups']);
    if (ctx.oidc.params.resource) grant.addResourceScope(ctx.oidc.params.resource, SCOPES.join(' '));
    await grant.save();
    return grant;
  },
  ttl: {
    AccessToken: (ctx, token) => (token.resourceServer ? accessTokenTTL : 600),
    IdToken: 600,
    Session: 3600,
    Grant: 3600,
  },
  cookies: { keys: ['storageops-test-provider-cookie-key'] },
};

const provider = new Provider(issuer, configuration);
const providerCallback = provider.callback();

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString() || '{}');
}

async function admin(req, res) {
  const body = await readJson(req);
  const account = req.url.match(/^\/test-admin\/accounts\/([^/]+)$/);
  if (req.method === 'PUT' && account) {
    const login = decodeURIComponent(account[1]);
    accounts[login] = { ...(accounts[login] ?? {}), groups: body.groups ?? [] };
  } else if (req.method === 'PUT' && req.url === '/test-admin/access-token-ttl') {
    accessTokenTTL = Number(body.seconds);
  } else {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(204).end();
}

const server = http.createServer((req, res) => {
  if (req.url.startsWith('/test-admin/')) {
    admin(req, res).catch((err) => res.writeHead(400).end(String(err)));
  } else {
    providerCallback(req, res);
  }
});
server.listen(port, '127.0.0.1', () => {
  // The fixture waits for this line.
  console.log(`oidc-provider listening on ${issuer}`);
});
