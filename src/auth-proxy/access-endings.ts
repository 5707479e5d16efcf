/**
 * What a request to Keycloak ends, once Keycloak has answered it with success: the one table of
 * the logouts, revocations and account changes that pass through the `/auth` mount (the admin
 * API on the admin listener only, where `guardAuthPath` lets it through). end-access.ts applies
 * them; a request Keycloak refuses ends nothing.
 */
export type Ending =
  /** One Keycloak session: its tokens are refused (a console's session delete). */
  | { kind: 'session'; realm: string; sessionId: string }
  /**
   * A user's access: with `tokens`, every token issued before now (logout, disable, delete,
   * consent revoked); always, the user's cached Basic logins (a password reset: only those,
   * and, `passwordSet`, the wrong passwords the login throttle remembers of the user).
   */
  | { kind: 'user'; realm: string; userId: string; tokens: boolean; passwordSet?: boolean }
  /**
   * Every session of the realm: every token issued before now (or before the realm's new
   * not-before, epoch ms) and every cached login.
   */
  | { kind: 'realm'; realm: string; notBefore?: number }
  /** The realm's key providers changed: its key set is fetched again. */
  | { kind: 'keys'; realm: string }
  /**
   * A client's logout: the session of the refresh token (which Keycloak verifies and refuses
   * when bad), else of the ID token hint (which the gateway verifies itself).
   */
  | { kind: 'logout'; realm: string; refreshToken?: string; idTokenHint?: string }
  /**
   * RFC 7009 revocation: of an access token (which the gateway verifies itself), or of a refresh
   * or offline token (whose claims Keycloak's success vouches for).
   */
  | { kind: 'revoke'; realm: string; token: string };

/** What a rule reads from the request: form fields (POST), query, the JSON body it asked for. */
export interface EndingInput {
  query: URLSearchParams;
  form: URLSearchParams | undefined;
  json: unknown;
}

interface Rule {
  methods: readonly string[];
  /** Segments after `auth`; `:name` captures one segment. */
  path: readonly string[];
  /** The rule reads the JSON body (the admin API's user representation). */
  json?: true;
  /** Which answers are Keycloak's success; 2xx unless said. */
  succeeded?: (status: number, body: Buffer | undefined) => boolean;
  /** `succeeded` reads the answer's body too. */
  readsAnswer?: true;
  ending: (params: Record<string, string>, input: EndingInput) => Ending | undefined;
}

const ADMIN = ['admin', 'realms', ':realm'];
const USER = [...ADMIN, 'users', ':user'];
const OIDC = ['realms', ':realm', 'protocol', 'openid-connect'];

const userEnding = (p: Record<string, string>, tokens: boolean): Ending => ({
  kind: 'user',
  realm: p.realm!,
  userId: p.user!,
  tokens,
});

/** The one value of a parameter; none when absent or sent twice (read one way by everyone). */
function single(params: URLSearchParams | undefined, name: string): string | undefined {
  const values = params?.getAll(name) ?? [];
  return values.length === 1 && values[0] !== '' ? values[0] : undefined;
}

/** The logout endpoint: a refresh token in a POST form, or an ID token hint (query or form). */
function logoutOf(realm: string, params: URLSearchParams | undefined): Ending | undefined {
  const refreshToken = single(params, 'refresh_token');
  if (refreshToken) return { kind: 'logout', realm, refreshToken };
  const idTokenHint = single(params, 'id_token_hint');
  return idTokenHint ? { kind: 'logout', realm, idTokenHint } : undefined;
}

const RULES: readonly Rule[] = [
  {
    methods: ['DELETE'],
    path: [...ADMIN, 'sessions', ':session'],
    ending: (p) => ({ kind: 'session', realm: p.realm!, sessionId: p.session! }),
  },
  { methods: ['POST'], path: [...USER, 'logout'], ending: (p) => userEnding(p, true) },
  {
    methods: ['PUT'],
    path: USER,
    json: true,
    // Keycloak's JSON reader coerces (`"false"`, `0`): any `enabled` but `true` counts as a
    // disable, and at worst an enabled user logs in again.
    ending: (p, { json }) =>
      typeof json === 'object' && json !== null && 'enabled' in json && json.enabled !== true
        ? userEnding(p, true)
        : undefined,
  },
  { methods: ['DELETE'], path: USER, ending: (p) => userEnding(p, true) },
  {
    methods: ['PUT'],
    path: [...USER, 'reset-password'],
    ending: (p) => ({ ...userEnding(p, false), passwordSet: true }),
  },
  // Keycloak ends the user's sessions of that client, online and offline; which sessions those
  // are it does not say, so every token of the user from before now is refused (a client of
  // another session refreshes once).
  {
    methods: ['DELETE'],
    path: [...USER, 'consents', ':client'],
    ending: (p) => userEnding(p, true),
  },
  {
    methods: ['POST'],
    path: [...ADMIN, 'logout-all'],
    ending: (p) => ({ kind: 'realm', realm: p.realm! }),
  },
  // The console's "Revocation: Set to now" sets the realm's not-before, and Keycloak refuses
  // every token issued before it; any realm update carries it, so it is applied as the moment
  // it names (an old one refuses only tokens long expired).
  {
    methods: ['PUT'],
    path: ADMIN,
    json: true,
    ending: (p, { json }) => {
      const notBefore = Number((json as { notBefore?: unknown } | undefined)?.notBefore);
      return Number.isFinite(notBefore) && notBefore > 0
        ? { kind: 'realm', realm: p.realm!, notBefore: Math.floor(notBefore) * 1000 }
        : undefined;
    },
  },
  // Any component change: key providers are components, and one key-set fetch costs little.
  {
    methods: ['POST'],
    path: [...ADMIN, 'components'],
    ending: (p) => ({ kind: 'keys', realm: p.realm! }),
  },
  {
    methods: ['PUT', 'DELETE'],
    path: [...ADMIN, 'components', ':component'],
    ending: (p) => ({ kind: 'keys', realm: p.realm! }),
  },
  // With a refresh token Keycloak answers 204; with an ID token hint a redirect or its page.
  {
    methods: ['POST'],
    path: [...OIDC, 'logout'],
    succeeded: (status) => status >= 200 && status < 400,
    ending: (p, { form }) => logoutOf(p.realm!, form),
  },
  {
    methods: ['GET'],
    path: [...OIDC, 'logout'],
    succeeded: (status) => status >= 200 && status < 400,
    ending: (p, { query }) => {
      const idTokenHint = single(query, 'id_token_hint');
      return idTokenHint ? { kind: 'logout', realm: p.realm!, idTokenHint } : undefined;
    },
  },
  // Keycloak answers 200 also to a token it does not accept (forged, expired, of an ended
  // session), with an `error` in the body; what it revoked it answers with an empty 200.
  {
    methods: ['POST'],
    path: [...OIDC, 'revoke'],
    readsAnswer: true,
    succeeded: (status, body) => status === 200 && body?.length === 0,
    ending: (p, { form }) => {
      const token = single(form, 'token');
      return token ? { kind: 'revoke', realm: p.realm!, token } : undefined;
    },
  },
];

/** The rule a request matches (`segments` as the edge read them, `auth` first), if any. */
export function endingRuleOf(
  method: string | undefined,
  segments: readonly string[],
):
  | {
      readsJson: boolean;
      readsAnswer: boolean;
      endingOf: (input: EndingInput) => Ending | undefined;
      succeeded: (status: number, body: Buffer | undefined) => boolean;
    }
  | undefined {
  if (segments[0] !== 'auth') return undefined;
  // Keycloak serves `users/{id}/` as `users/{id}`.
  const rest = segments.at(-1) === '' ? segments.slice(1, -1) : segments.slice(1);
  for (const rule of RULES) {
    if (!method || !rule.methods.includes(method)) continue;
    const params = matched(rule.path, rest);
    if (!params) continue;
    return {
      readsJson: rule.json === true,
      readsAnswer: rule.readsAnswer === true,
      endingOf: (input) => rule.ending(params, input),
      succeeded: rule.succeeded ?? ((status) => status >= 200 && status < 300),
    };
  }
  return undefined;
}

function matched(pattern: readonly string[], segments: readonly string[]) {
  if (pattern.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i]!;
    const got = segments[i]!;
    if (want.startsWith(':')) {
      if (got === '') return undefined;
      params[want.slice(1)] = got;
    } else if (want !== got) return undefined;
  }
  return params;
}
