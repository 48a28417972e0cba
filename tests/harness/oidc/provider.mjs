// A real OpenID Connect provider for the tests (panva's oidc-provider, certified): discovery, JWKS, the
// authorization code flow with PKCE, RP-initiated logout, and its development login and consent pages.
// Accounts and their groups are read from ACCOUNTS_FILE at every sign-in, so a test can take a group away.
import fs from 'node:fs';
import Provider from 'oidc-provider';

const env = process.env;
const port = Number(env.PORT);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: env.CLIENT_ID,
    client_secret: env.CLIENT_SECRET,
    redirect_uris: env.REDIRECT_URIS.split(','),
    post_logout_redirect_uris: env.POST_LOGOUT_REDIRECT_URIS.split(','),
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email'], profile: ['preferred_username'], groups: ['groups'] },
  // The claims in the ID token itself, as many company providers do (and the userinfo endpoint too).
  conformIdTokenClaims: false,
  ttl: { IdToken: Number(env.ID_TOKEN_TTL || 3600), AccessToken: 3600, AuthorizationCode: 60 },
  cookies: { keys: ['test-cookie-key-not-secret'] },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    const accounts = JSON.parse(fs.readFileSync(env.ACCOUNTS_FILE, 'utf8'));
    const account = accounts[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email: account.email, groups: account.groups };
      },
    };
  },
});

provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${issuer}`));

// Errors the provider answers with "server_error" are printed for the test's log.
provider.on('server_error', (ctx, err) => console.error('server_error', err));
