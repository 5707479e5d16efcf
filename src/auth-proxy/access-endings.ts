import type { HttpMethod } from '../edge/route.ts';
import type { AnswerBody } from './hooked-answer.ts';

/**
 * What a request to Keycloak ends, once Keycloak has answered it with success: the one table of
 * the logouts, revocations, account and lifetime changes that pass through the `/auth` mount (the
 * admin API on the admin listener only, where `guardAuthPath` lets it through). Each rule is an
 * entry of the `/auth` route table (auth-routes.ts), so the edge matches its path; end-access.ts
 * applies them; a request Keycloak refuses (a 4xx) ends nothing, and keeps no former lifetime
 * (`changesLifetimes`).
 */
export type Ending =
  /** One Keycloak session: its tokens are refused (a console's session delete). */
  | { kind: 'session'; realm: string; sessionId: string }
  /**
   * A user's access: with `tokens`, every token issued before now (logout, disable, delete,
   * consent revoked); always, the user's cached Basic logins (a password reset, a credential
   * removed, a required action: only those; and, `passwordSet`, the wrong passwords the login
   * throttle remembers of the user).
   */
  | { kind: 'user'; realm: string; userId: string; tokens: boolean; passwordSet?: boolean }
  /**
   * The members of a group and of its subgroups lose roles (one taken from the group, the group
   * deleted, or moved from under a parent whose roles it inherited): every token of each of them
   * issued before now, and their cached Basic logins.
   */
  | { kind: 'group'; realm: string; groupId: string }
  /**
   * A role deleted (a realm role by name, a client's by its client's UUID and name, or any by
   * id): every token of the realm issued before now that carries it, whoever holds it.
   */
  | { kind: 'role'; realm: string; role: RoleRef }
  /**
   * Roles (by id) taken from a composite: whoever held the composite (directly, through a group,
   * another composite or the default roles) loses them, unless held otherwise. Its holders are
   * not read; the roles live on, and the tokens of the realm issued before now that carry one
   * are refused as for a deleted role (a holder of one of its own refreshes once).
   */
  | { kind: 'composite'; realm: string; roleIds: string[] }
  /**
   * A client deleted, and its roles with it: every token of the realm issued before now that
   * carries one of them is refused as for a deleted role.
   */
  | { kind: 'client'; realm: string; clientUuid: string }
  /**
   * Every session of the realm (or the realm deleted): every token issued before now (or before
   * the realm's new not-before, epoch ms) and every cached login.
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

/** A role as the admin API's path names it. */
export type RoleRef = { name: string; clientUuid?: string } | { id: string };

/** What a rule reads from the request: form fields (POST), query, the JSON body it asked for. */
export interface EndingInput {
  query: URLSearchParams;
  form: URLSearchParams | undefined;
  json: unknown;
}

/** One kind of request that ends access; auth-routes.ts makes it an entry of the `/auth` table. */
export interface EndingRule {
  methods: readonly HttpMethod[];
  /** Its path, as the route table declares it: `{name}` is one segment, `{realm}` the realm. */
  path: string;
  /** The rule reads the JSON body (the admin API's user representation). */
  json?: true;
  /** Which answers are Keycloak's success; 2xx unless said. */
  succeeded?: (status: number, body: AnswerBody | undefined) => boolean;
  /** `succeeded` reads the answer's body too: its size, and whether it holds `answerMarker`. */
  readsAnswer?: true;
  answerMarker?: Buffer;
  /**
   * The request can shorten how long the realm's access tokens live (its settings, a client's
   * own lifespan, a client gone): the realm's longest lifetime is read before it is forwarded,
   * and every replica is told it once Keycloak has answered, unless it refused (a 4xx), or once
   * the request is over when it never answered (end-access.ts).
   */
  changesLifetimes?: true;
  ending: (params: Readonly<Record<string, string>>, input: EndingInput) => Ending | undefined;
}

const ADMIN = '/auth/admin/realms/{realm}';
const USER = `${ADMIN}/users/{user}`;
const GROUP = `${ADMIN}/groups/{group}`;
const OIDC = '/auth/realms/{realm}/protocol/openid-connect';
/** Keycloak 26 console's own endpoint for taking roles away (its "Unassign"). */
const UI_MAPPINGS = `${ADMIN}/ui-ext/role-mapping-delete`;

const userEnding = (p: Readonly<Record<string, string>>, tokens: boolean): Ending => ({
  kind: 'user',
  realm: p.realm!,
  userId: p.user!,
  tokens,
});

const groupEnding = (p: Readonly<Record<string, string>>): Ending => ({
  kind: 'group',
  realm: p.realm!,
  groupId: p.group!,
});

/** The one value of a parameter; none when absent or sent twice (read one way by everyone). */
function single(params: URLSearchParams | undefined, name: string): string | undefined {
  const values = params?.getAll(name) ?? [];
  return values.length === 1 && values[0] !== '' ? values[0] : undefined;
}

/**
 * The role ids of a list of role representations (the admin API's composites body): Keycloak
 * reads the `id` of each and nothing else, and refuses the whole list when one names no role.
 * The console's own endpoint names them `roleId` (`field`).
 */
function roleIdsOf(json: unknown, field: 'id' | 'roleId' = 'id'): string[] {
  if (!Array.isArray(json)) return [];
  const ids = json.map((role: unknown) => (role as Record<string, unknown> | null)?.[field]);
  // `.`, `..` or a `/` in an id would name another path of the admin API once read; no role
  // has such an id, so Keycloak refuses the list and nothing ends.
  const named = ids.filter(
    (id): id is string => typeof id === 'string' && id !== '' && !/^\.\.?$|\//.test(id),
  );
  return [...new Set(named)];
}

/** Whether the JSON object has `name` as a list of at least one item. */
function nonEmptyList(json: object, name: string): boolean {
  const value: unknown = (json as Record<string, unknown>)[name];
  return Array.isArray(value) && value.length > 0;
}

/**
 * The logout endpoint: a refresh token in a POST form, or an ID token hint (query or form).
 * Keycloak takes a form that has `refresh_token` at all for a refresh-token logout, and reads
 * no hint beside it: neither does the gateway (a refresh token sent twice ends nothing here).
 */
function logoutOf(realm: string, params: URLSearchParams | undefined): Ending | undefined {
  if (params?.has('refresh_token')) {
    const refreshToken = single(params, 'refresh_token');
    return refreshToken ? { kind: 'logout', realm, refreshToken } : undefined;
  }
  const idTokenHint = single(params, 'id_token_hint');
  return idTokenHint ? { kind: 'logout', realm, idTokenHint } : undefined;
}

/**
 * Where Keycloak's logout confirmation page posts: it shows it, and ends nothing, when a hint's
 * logout needs the user's word (a `client_id` it does not know, a browser signed in to another
 * session than the hint's).
 */
const LOGOUT_CONFIRM_PATH = Buffer.from('/protocol/openid-connect/logout/logout-confirm');

/**
 * Whether Keycloak's answer to a logout says it logged out: 204 (a refresh token's), a redirect
 * (to the client's `post_logout_redirect_uri`), or a page that is not its confirmation page (its
 * "logged out" page, a front-channel logout's page), of any size. A page without a body (HEAD)
 * says nothing.
 */
function loggedOut(status: number, body: AnswerBody | undefined): boolean {
  if (status === 204 || (status >= 300 && status < 400)) return true;
  if (status < 200 || status >= 300 || body === undefined || body.bytes === 0) return false;
  return !body.marked;
}

export const ENDING_RULES: readonly EndingRule[] = [
  {
    methods: ['delete'],
    path: `${ADMIN}/sessions/{session}`,
    ending: (p) => ({ kind: 'session', realm: p.realm!, sessionId: p.session! }),
  },
  { methods: ['post'], path: `${USER}/logout`, ending: (p) => userEnding(p, true) },
  {
    methods: ['put'],
    path: USER,
    json: true,
    ending: (p, { json }) => {
      if (typeof json !== 'object' || json === null) return undefined;
      // Keycloak's JSON reader coerces (`"false"`, `0`): any `enabled` but `true` counts as a
      // disable, and at worst an enabled user logs in again.
      const disabled = 'enabled' in json && json.enabled !== true;
      // Keycloak sets the credentials an update carries (a `value` as the password, whatever
      // its `type`), as a password reset does: any counts, and at worst cached logins log in
      // again.
      const passwordSet = nonEmptyList(json, 'credentials');
      // A required action (the console's "Required user actions", e.g. Configure OTP) makes
      // Keycloak refuse the user's password grants until it is done: a cached Basic login must
      // not outlive it. The console sends the list with every save; an empty one changes nothing.
      const actionRequired = nonEmptyList(json, 'requiredActions');
      if (!disabled && !passwordSet && !actionRequired) return undefined;
      return { ...userEnding(p, disabled), ...(passwordSet && { passwordSet }) };
    },
  },
  { methods: ['delete'], path: USER, ending: (p) => userEnding(p, true) },
  // A credential removed (a password, an OTP) or all of some types (the console's "Reset OTP"
  // through `disable-credential-types`): the cached Basic logins of the user log in again, and
  // Keycloak decides with the credentials the user has now.
  {
    methods: ['delete'],
    path: `${USER}/credentials/{credential}`,
    ending: (p) => userEnding(p, false),
  },
  {
    methods: ['put'],
    path: `${USER}/disable-credential-types`,
    ending: (p) => userEnding(p, false),
  },
  {
    methods: ['put'],
    path: `${USER}/reset-password`,
    ending: (p) => ({ ...userEnding(p, false), passwordSet: true }),
  },
  // A role taken from the user (the console's "Unassign", or a group left): a token keeps the
  // roles it was issued with (a workspace's, the `Roles` and `Org-Roles` an upstream is told),
  // so every token of the user from before now is refused, as the realmgate API does when it
  // removes a workspace role (a client refreshes once, and gets the roles the user has now).
  { methods: ['delete'], path: `${USER}/role-mappings/realm`, ending: (p) => userEnding(p, true) },
  {
    methods: ['delete'],
    path: `${USER}/role-mappings/clients/{client}`,
    ending: (p) => userEnding(p, true),
  },
  { methods: ['delete'], path: `${USER}/groups/{group}`, ending: (p) => userEnding(p, true) },
  // A role taken from a group, or the group deleted: each member of it and of its subgroups
  // (which inherit its roles) loses roles at once, as a user who leaves it does. The members are
  // read before Keycloak is asked (a deleted group's cannot be read after).
  { methods: ['delete'], path: GROUP, ending: (p) => groupEnding(p) },
  { methods: ['delete'], path: `${GROUP}/role-mappings/realm`, ending: (p) => groupEnding(p) },
  {
    methods: ['delete'],
    path: `${GROUP}/role-mappings/clients/{client}`,
    ending: (p) => groupEnding(p),
  },
  // A group moved (a body naming an existing group, under another parent or to the top level):
  // it and its subgroups lose the roles inherited from the former parent. A body without an id
  // creates a group, which ends nothing.
  ...[`${ADMIN}/groups`, `${GROUP}/children`].map((path): EndingRule => ({
    methods: ['post'],
    path,
    json: true,
    ending: (p, { json }) => {
      const id: unknown = (json as { id?: unknown } | null | undefined)?.id;
      return typeof id === 'string' && id !== ''
        ? groupEnding({ realm: p.realm!, group: id })
        : undefined;
    },
  })),
  // The console's "Unassign" (Keycloak 26) through its own endpoint: roles taken from a user, a
  // group or a composite in one POST, each named by `roleId` (Keycloak reads nothing else to
  // find it). As the admin API's removals above.
  {
    methods: ['post'],
    path: `${UI_MAPPINGS}/users/{user}`,
    ending: (p) => userEnding(p, true),
  },
  { methods: ['post'], path: `${UI_MAPPINGS}/groups/{group}`, ending: (p) => groupEnding(p) },
  {
    methods: ['post'],
    path: `${UI_MAPPINGS}/roles/{role}`,
    json: true,
    ending: (p, { json }) => {
      const roleIds = roleIdsOf(json, 'roleId');
      return roleIds.length > 0 ? { kind: 'composite', realm: p.realm!, roleIds } : undefined;
    },
  },
  // A role deleted: whoever held it (directly, through a group, a composite or the default
  // roles) loses it; who that was cannot be read once it is gone, but each token names its roles.
  {
    methods: ['delete'],
    path: `${ADMIN}/roles/{role}`,
    ending: (p) => ({ kind: 'role', realm: p.realm!, role: { name: p.role! } }),
  },
  {
    methods: ['delete'],
    path: `${ADMIN}/clients/{client}/roles/{role}`,
    ending: (p) => ({
      kind: 'role',
      realm: p.realm!,
      role: { name: p.role!, clientUuid: p.client! },
    }),
  },
  {
    methods: ['delete'],
    path: `${ADMIN}/roles-by-id/{role}`,
    ending: (p) => ({ kind: 'role', realm: p.realm!, role: { id: p.role! } }),
  },
  // Roles taken from a composite (a realm role's, a client role's, or any by id; the console's
  // "Remove associated roles").
  ...[
    `${ADMIN}/roles/{role}`,
    `${ADMIN}/clients/{client}/roles/{role}`,
    `${ADMIN}/roles-by-id/{role}`,
  ].map((composite): EndingRule => ({
    methods: ['delete'],
    path: `${composite}/composites`,
    json: true,
    ending: (p, { json }) => {
      const roleIds = roleIdsOf(json);
      return roleIds.length > 0 ? { kind: 'composite', realm: p.realm!, roleIds } : undefined;
    },
  })),
  // A client deleted (the organization's workspaces client among them): its roles go with it,
  // whoever held them. They are read before Keycloak is asked (a deleted client's cannot be).
  {
    methods: ['delete'],
    path: `${ADMIN}/clients/{client}`,
    changesLifetimes: true,
    ending: (p) => ({ kind: 'client', realm: p.realm!, clientUuid: p.client! }),
  },
  // A client's own access-token lifespan changed (the console's client "Advanced" tab), or
  // clients overwritten by a partial import: the realm's longest lifetime may be shorter after.
  // A client created (`POST .../clients`) only adds one: it shortens nothing.
  {
    methods: ['put'],
    path: `${ADMIN}/clients/{client}`,
    changesLifetimes: true,
    ending: () => undefined,
  },
  {
    methods: ['post'],
    path: `${ADMIN}/partialImport`,
    changesLifetimes: true,
    ending: () => undefined,
  },
  // Keycloak ends the user's sessions of that client, online and offline; which sessions those
  // are it does not say, so every token of the user from before now is refused (a client of
  // another session refreshes once).
  {
    methods: ['delete'],
    path: `${USER}/consents/{client}`,
    ending: (p) => userEnding(p, true),
  },
  {
    methods: ['post'],
    path: `${ADMIN}/logout-all`,
    ending: (p) => ({ kind: 'realm', realm: p.realm! }),
  },
  // The realm deleted: a replica holding its key set would go on verifying its tokens, and its
  // cached Basic logins, until they expire; and a realm created again under the name (same
  // issuer) must accept nothing the old one issued. As the realmgate API's organization delete.
  { methods: ['delete'], path: ADMIN, ending: (p) => ({ kind: 'realm', realm: p.realm! }) },
  // The console's "Revocation: Set to now" sets the realm's not-before, and Keycloak refuses
  // every token issued before it; any realm update carries it, so it is applied as the moment
  // it names (an old one refuses only tokens long expired). A realm update may also shorten the
  // realm's lifetimes (its access-token lifespan, its implicit flow's).
  // Keycloak 26's console saves a realm's settings through its own endpoint, `PUT .../ui-ext`
  // (the admin API's realm update behind it, then the user profile): the same rule.
  ...[ADMIN, `${ADMIN}/ui-ext`].map((path): EndingRule => ({
    methods: ['put'],
    path,
    json: true,
    changesLifetimes: true,
    ending: (p, { json }) => {
      const notBefore = Number((json as { notBefore?: unknown } | undefined)?.notBefore);
      return Number.isFinite(notBefore) && notBefore > 0
        ? { kind: 'realm', realm: p.realm!, notBefore: Math.floor(notBefore) * 1000 }
        : undefined;
    },
  })),
  // Any component change: key providers are components, and one key-set fetch costs little.
  {
    methods: ['post'],
    path: `${ADMIN}/components`,
    ending: (p) => ({ kind: 'keys', realm: p.realm! }),
  },
  {
    methods: ['put', 'delete'],
    path: `${ADMIN}/components/{component}`,
    ending: (p) => ({ kind: 'keys', realm: p.realm! }),
  },
  // With a refresh token Keycloak answers 204; with an ID token hint a redirect or a page, which
  // may be its confirmation page (nothing ended yet): the answer is read.
  {
    methods: ['post'],
    path: `${OIDC}/logout`,
    readsAnswer: true,
    answerMarker: LOGOUT_CONFIRM_PATH,
    succeeded: loggedOut,
    ending: (p, { form }) => logoutOf(p.realm!, form),
  },
  {
    methods: ['get'],
    path: `${OIDC}/logout`,
    readsAnswer: true,
    answerMarker: LOGOUT_CONFIRM_PATH,
    succeeded: loggedOut,
    ending: (p, { query }) => {
      const idTokenHint = single(query, 'id_token_hint');
      return idTokenHint ? { kind: 'logout', realm: p.realm!, idTokenHint } : undefined;
    },
  },
  // Keycloak answers 200 also to a token it does not accept (forged, expired, of an ended
  // session), with an `error` in the body; what it revoked it answers with an empty 200.
  {
    methods: ['post'],
    path: `${OIDC}/revoke`,
    readsAnswer: true,
    succeeded: (status, body) => status === 200 && body?.bytes === 0,
    ending: (p, { form }) => {
      const token = single(form, 'token');
      return token ? { kind: 'revoke', realm: p.realm!, token } : undefined;
    },
  },
];

/** What end-access.ts applies of the rule an `/auth` entry carries, with the path's params. */
export interface MatchedEnding {
  readsJson: boolean;
  readsAnswer: boolean;
  answerMarker?: Buffer;
  changesLifetimes: boolean;
  endingOf: (input: EndingInput) => Ending | undefined;
  succeeded: (status: number, body: AnswerBody | undefined) => boolean;
}

/** `rule` (an `/auth` entry's) applied to the params the edge read from the path. */
export function matchedEnding(
  rule: EndingRule,
  params: Readonly<Record<string, string>>,
): MatchedEnding {
  return {
    readsJson: rule.json === true,
    readsAnswer: rule.readsAnswer === true,
    changesLifetimes: rule.changesLifetimes === true,
    ...(rule.answerMarker && { answerMarker: rule.answerMarker }),
    endingOf: (input) => rule.ending(params, input),
    succeeded: rule.succeeded ?? ((status) => status >= 200 && status < 300),
  };
}
