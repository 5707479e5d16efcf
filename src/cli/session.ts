import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { callApi, type ApiRequest } from './client.ts';
import {
  credentialsPathOf,
  readLogins,
  updateLogins,
  withoutLogin,
  type LoginSelector,
  type StoredLogin,
} from './credentials.ts';
import { dpopProof, type DpopKey } from './dpop.ts';
import { canonicalAddressOf } from './canonical-address.ts';
import { CliError } from './errors.ts';
import type { RunContext } from './io.ts';
import {
  accessTokenOf,
  callAs,
  connectionOf,
  findStoredLogin,
  isLoginExpired,
  keyOfLogin,
  resolveCaller,
  type Caller,
} from './stored-login.ts';

/** `realmgate token`: an access token of the stored login `select` picks. */
export async function accessToken(
  select: LoginSelector,
  { env, timeoutMs }: RunContext,
): Promise<string> {
  const stored = await findStoredLogin(env, select);
  return (await accessTokenOf(stored, timeoutMs)).token;
}

/**
 * `realmgate proof <method> <url>`: a fresh DPoP proof of the stored login's key for one call
 * with the access token `realmgate token` prints (the same cached one), for a script that sends
 * it with `Authorization: DPoP`. A login with bearer tokens has no key to prove.
 */
export async function proofFor(
  select: LoginSelector,
  target: { method: string; url: URL; nonce?: string },
  { env, timeoutMs }: RunContext,
): Promise<string> {
  const stored = await findStoredLogin(env, select);
  const { key } = stored;
  if (key === undefined) {
    throw new CliError(
      'config',
      `the stored login of ${describe(stored.login)} has bearer tokens (no key): send them ` +
        'as Authorization: Bearer, without a proof',
    );
  }
  const { token } = await accessTokenOf(stored, timeoutMs);
  // A URL under REALMGATE_URL is named under the gateway's own address, which it compares
  // `htu` with; any other URL as given.
  const { baseUrl, login } = stored;
  const below = target.url.href.startsWith(baseUrl.href)
    ? target.url.href.slice(baseUrl.href.length)
    : undefined;
  const url =
    below === undefined
      ? target.url
      : new URL(
          (await canonicalAddressOf(baseUrl, login.realm, login.canonicalUrl, timeoutMs)).href +
            below,
        );
  return dpopProof(key, { ...target, url, accessToken: token });
}

/** `realmgate tokens list`: the user's refresh tokens (offline sessions). */
export async function listTokens(
  select: LoginSelector,
  { env, timeoutMs }: RunContext,
): Promise<unknown> {
  const { caller, path } = await tokensCaller(select, env);
  const listed = await callAs(caller, { method: 'GET', path }, timeoutMs);
  return withKeyFiles(listed, env);
}

/**
 * The list with, on each token this machine holds a login of, `key_file`: the file its key is
 * kept in (the credentials file itself, or a key file of its own: `login --key-file`), null for
 * a bearer login. Tokens of logins held elsewhere are listed as the gateway answered them.
 */
async function withKeyFiles(
  listed: unknown,
  env: Record<string, string | undefined>,
): Promise<unknown> {
  const path = credentialsPathOf(env);
  if (!Array.isArray(listed) || path === undefined) return listed;
  const held = new Map((await readLogins(path)).map((login) => [login.sessionId, login]));
  return listed.map((token: unknown) => {
    const id = (token as { id?: unknown } | null)?.id;
    const login = typeof id === 'string' ? held.get(id) : undefined;
    if (login === undefined) return token;
    const keyFile = login.keyFile ?? (login.dpopKey === undefined ? null : path);
    return { ...(token as object), key_file: keyFile };
  });
}

/** `realmgate tokens revoke <id|name> | --all`: one of the user's refresh tokens (by id or name), or all (`id` undefined). */
export async function revokeTokens(
  select: LoginSelector,
  id: string | undefined,
  { env, io, timeoutMs }: RunContext,
): Promise<unknown> {
  const { caller, path } = await tokensCaller(select, env);
  const target = id === undefined ? path : `${path}/${encodeURIComponent(id)}`;
  const data = await callAs(caller, { method: 'DELETE', path: target }, timeoutMs);
  // The stored login's own session went with it: its refresh token is of no use any more.
  if (caller.kind === 'stored' && (id === undefined || id === caller.login.sessionId)) {
    await forget(caller, caller.login);
    io.stderr.write(
      `realmgate: this revoked the stored login of ${describe(caller.login)} too; it is ` +
        `forgotten (realmgate login logs in again)\n`,
    );
  }
  return data;
}

/** Who manages the refresh tokens, and the path of the realm's refresh-token endpoints. */
async function tokensCaller(
  select: LoginSelector,
  env: Record<string, string | undefined>,
): Promise<{ caller: Caller; path: string }> {
  const caller = await resolveCaller(
    env,
    select,
    'no credentials: log in with realmgate login <realm> <username>, or set REALMGATE_TOKEN, ' +
      'or REALMGATE_USERNAME and REALMGATE_PASSWORD (with --realm for an organization user)',
  );
  const realm = caller.kind === 'stored' ? caller.login.realm : (select.realm ?? MASTER_REALM);
  return { caller, path: refreshTokensPath(realm) };
}

/**
 * Revokes the stored login's offline session alone (`DELETE .../refresh_tokens/<sid>`; the
 * gateway also refuses its access tokens at once on every replica) and forgets it. A session
 * that is already gone is simply forgotten.
 */
export async function logout(
  select: LoginSelector,
  { env, io, timeoutMs }: RunContext,
): Promise<void> {
  const stored = await findStoredLogin(env, select);
  const caller: Caller = { kind: 'stored', ...stored };
  try {
    await callAs(
      caller,
      { method: 'DELETE', path: sessionPath(caller.login, caller.login.sessionId) },
      timeoutMs,
    );
  } catch (error) {
    // Expired or revoked already (refresh refused, or the gateway knows no such session).
    const gone = isLoginExpired(error) || (error instanceof CliError && error.status === 404);
    if (!gone) throw error;
  }
  await forget(caller, caller.login);
  io.stderr.write(`realmgate: logged out ${describe(caller.login)}\n`);
}

/**
 * Revokes the offline session of `replaced`, the stored login a new login of the same user
 * (`by`) has just taken the place of. With `by`'s access token, unless it is read-only (the
 * gateway refuses a read-only token's DELETE of another session as a write); else, or when that
 * fails, with the replaced login's own token and key, which may always revoke its own session,
 * whatever its reach. A session already gone (its refresh token refused, or unknown to the
 * gateway) counts as revoked. Returns why it could not be revoked; undefined when it is.
 */
export async function revokeReplaced(
  replaced: StoredLogin,
  by: { login: StoredLogin; key: DpopKey | undefined; readOnly: boolean },
  {
    env,
    path,
    timeoutMs,
  }: { env: Record<string, string | undefined>; path: string; timeoutMs: number },
): Promise<string | undefined> {
  const request: ApiRequest = {
    method: 'DELETE',
    path: sessionPath(replaced, replaced.sessionId),
  };
  const attempts: Array<() => Promise<unknown>> = [];
  if (!by.readOnly) {
    attempts.push(async () =>
      callApi(
        request,
        await connectionOf(new URL(by.login.gateway), by, by.login.accessToken ?? '', timeoutMs),
        timeoutMs,
      ),
    );
  }
  attempts.push(async () => {
    const key = await keyOfLogin(replaced, env);
    const baseUrl = new URL(replaced.gateway);
    return callAs({ kind: 'stored', baseUrl, login: replaced, path, key }, request, timeoutMs);
  });
  let reason = '';
  for (const attempt of attempts) {
    try {
      await attempt();
      return undefined;
    } catch (error) {
      if (isLoginExpired(error) || (error instanceof CliError && error.status === 404)) {
        return undefined;
      }
      reason = error instanceof CliError ? error.message : String(error);
    }
  }
  return reason;
}

async function forget(caller: { path: string }, login: StoredLogin): Promise<void> {
  await updateLogins(caller.path, (logins) => {
    // Only the revoked session: a newer login of the same user, written meanwhile, stays.
    const current = logins.find((other) => other.sessionId === login.sessionId);
    return current ? withoutLogin(logins, current) : undefined;
  });
}

/** `/api/platform/users/_current/refresh_tokens`, or its organization twin. */
function refreshTokensPath(realm: string): string {
  const prefix =
    realm === MASTER_REALM ? '/api/platform' : `/api/${encodeURIComponent(realm)}/platform`;
  return `${prefix}/users/_current/refresh_tokens`;
}

function sessionPath(login: StoredLogin, sessionId: string): string {
  return `${refreshTokensPath(login.realm)}/${encodeURIComponent(sessionId)}`;
}

function describe(login: StoredLogin): string {
  return `${login.username} (realm ${login.realm}) at ${login.gateway}`;
}
