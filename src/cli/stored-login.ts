import { canonicalAddressOf, withCanonicalSetting } from './canonical-address.ts';
import {
  callApi,
  readBaseUrl,
  readEnvAuthorization,
  type ApiRequest,
  type Connection,
} from './client.ts';
import {
  credentialsPathOf,
  isSameLogin,
  LOCK_WAIT_MS,
  readLogins,
  selectLogin,
  withLockedLogins,
  withLogin,
  type LoginSelector,
  type StoredLogin,
} from './credentials.ts';
import type { DpopKey } from './dpop.ts';
import { CliError } from './errors.ts';
import { keyFilePathOf, readKeyFile } from './key-file.ts';
import { refreshGrant } from './token-endpoint.ts';

/** A cached access token is reused while at least this much of its life is left. */
export const REUSE_MARGIN_MS = 60_000;

/**
 * A stored login as a command uses it: where it was read from, and the key its tokens are bound
 * to (read from its key file when it keeps it apart); no key: bearer tokens.
 */
export interface LoadedLogin {
  baseUrl: URL;
  login: StoredLogin;
  path: string;
  key: DpopKey | undefined;
}

/** Who calls the gateway: credentials from the environment, or a stored login. */
export type Caller =
  { kind: 'env'; baseUrl: URL; authorization: string } | ({ kind: 'stored' } & LoadedLogin);

/**
 * The key `login`'s tokens are bound to: its own `dpopKey`, or the one in its key file
 * (REALMGATE_KEY_FILE, when set, names where that file is on this host).
 */
export async function keyOfLogin(
  login: StoredLogin,
  env: Record<string, string | undefined>,
): Promise<DpopKey | undefined> {
  if (login.keyFile === undefined || login.keyThumbprint === undefined) return login.dpopKey;
  return readKeyFile(keyFilePathOf(undefined, env) ?? login.keyFile, login.keyThumbprint);
}

/** The credentials file, or a config error when the environment names no home for it. */
export function requireCredentialsPath(env: Record<string, string | undefined>): string {
  const path = credentialsPathOf(env);
  if (path === undefined) {
    throw new CliError('config', 'no place for credentials: set HOME or REALMGATE_CONFIG_DIR');
  }
  return path;
}

/**
 * The stored login that `--realm`/`--user` select at `REALMGATE_URL` (the most recent one
 * among the matches), or a config error that says how to log in.
 */
export async function findStoredLogin(
  env: Record<string, string | undefined>,
  selector: LoginSelector,
): Promise<LoadedLogin> {
  const baseUrl = readBaseUrl(env.REALMGATE_URL);
  const path = requireCredentialsPath(env);
  const selected = selectLogin(await readLogins(path), baseUrl.href, selector);
  const login = selected && withCanonicalSetting(selected, env);
  if (login === undefined) {
    // `--realm` passed checkRealm and may be said; `--user` matched nothing and is not echoed,
    // as no refused word is (values.ts): it could be a password pasted in its place.
    const realm = selector.realm ?? '<realm>';
    throw new CliError(
      'config',
      `no stored login${describeSelector(selector)} for ${baseUrl.href}; ` +
        `log in first: realmgate login ${realm} <username>`,
    );
  }
  return { baseUrl, login, path, key: await keyOfLogin(login, env) };
}

/**
 * Credentials for a command: `REALMGATE_TOKEN` or `REALMGATE_USERNAME`/`REALMGATE_PASSWORD`
 * when set, else the stored login `selector` picks. `missing` is the error when neither exists.
 */
export async function resolveCaller(
  env: Record<string, string | undefined>,
  selector: LoginSelector,
  missing: string,
): Promise<Caller> {
  const baseUrl = readBaseUrl(env.REALMGATE_URL);
  const authorization = readEnvAuthorization(env);
  if (authorization !== undefined) return { kind: 'env', baseUrl, authorization };
  const path = credentialsPathOf(env);
  const selected = path && selectLogin(await readLogins(path), baseUrl.href, selector);
  if (!path || !selected) throw new CliError('config', missing);
  const login = withCanonicalSetting(selected, env);
  return { kind: 'stored', baseUrl, login, path, key: await keyOfLogin(login, env) };
}

/**
 * Sends `request` as `caller` with `call` (`callApi`, or `openDownload` for a file). A stored
 * login's cached access token that the gateway refuses (revoked meanwhile) is dropped and the
 * call made once more with a fresh one.
 */
export async function callAs<T = unknown>(
  caller: Caller,
  request: ApiRequest,
  timeoutMs: number,
  call: (
    request: ApiRequest,
    connection: Connection,
    timeoutMs: number,
  ) => Promise<T> = callApi as (
    request: ApiRequest,
    connection: Connection,
    timeoutMs: number,
  ) => Promise<T>,
): Promise<T> {
  if (caller.kind === 'env') return call(request, caller, timeoutMs);
  const { baseUrl } = caller;
  const first = await accessTokenOf(caller, timeoutMs);
  const send = async (token: string) =>
    call(request, await connectionOf(baseUrl, caller, token, timeoutMs), timeoutMs);
  try {
    return await send(first.token);
  } catch (error) {
    if (!(error instanceof CliError && error.status === 401 && first.cached)) throw error;
  }
  return send((await accessTokenOf(caller, timeoutMs, { refresh: true })).token);
}

/**
 * How an access token of `login` is sent to `baseUrl`: `DPoP` with a proof of `key` when its
 * tokens are bound to it (naming the gateway's own address, learnt from the gateway and checked
 * against the one the login was made with), else `Bearer` (a login made with `--no-dpop`, or
 * before the CLI bound them).
 */
export async function connectionOf(
  baseUrl: URL,
  { login, key }: { login: StoredLogin; key: DpopKey | undefined },
  accessToken: string,
  timeoutMs: number,
): Promise<Connection> {
  if (key === undefined) return { baseUrl, authorization: `Bearer ${accessToken}` };
  const gateway = await canonicalAddressOf(baseUrl, login.realm, login.canonicalUrl, timeoutMs);
  return { baseUrl, authorization: `DPoP ${accessToken}`, dpop: { key, accessToken, gateway } };
}

/**
 * An access token of the stored login: the cached one while it has a minute left, else a new
 * one from a refresh grant, cached in the credentials file. A refused refresh token (expired,
 * revoked, user disabled) is an `api` error that says to log in again.
 */
export async function accessTokenOf(
  stored: LoadedLogin,
  timeoutMs: number,
  options: { refresh?: boolean; now?: () => number } = {},
): Promise<{ token: string; cached: boolean }> {
  const { login } = stored;
  const now = options.now ?? Date.now;
  if (!options.refresh && isFresh(login, now)) {
    return { token: login.accessToken!, cached: true };
  }
  // One refresh at a time per credentials file, under its lock: the jobs of a host that share
  // a login start together, and each would send the same refresh token; a realm that rotates
  // refresh tokens takes a second use for a stolen token and ends the session for all. Each
  // starts from what the one before it stored: its access token, or its rotated refresh token.
  const refused = options.refresh ? login.accessToken : undefined;
  // Those waiting name it if they give up: the gateway it waits for, not the lock, is the cause.
  const purpose = `a refresh of the login of ${login.username} (realm ${login.realm}) at ${login.gateway}`;
  return withLockedLogins(
    stored.path,
    LOCK_WAIT_MS + REFRESH_REQUESTS * timeoutMs,
    purpose,
    (logins) => refreshed(stored, logins, refused, timeoutMs, now),
  );
}

/** The most requests a refresh sends one after the other: discovery, the grant, its nonce retry. */
const REFRESH_REQUESTS = 3;

function isFresh(login: StoredLogin, now: () => number): boolean {
  const { accessToken, accessExpiresAt } = login;
  return (
    accessToken !== undefined &&
    accessExpiresAt !== undefined &&
    Date.parse(accessExpiresAt) - now() > REUSE_MARGIN_MS
  );
}

/**
 * The refresh of `stored` as the credentials file (`logins`, read under its lock) has it now:
 * an access token another process got meanwhile (not `refused`, the one the gateway refused),
 * else a refresh grant with the newest refresh token, its tokens to be written. A newer login
 * of the same user (another session), written meanwhile, is left as it is.
 */
async function refreshed(
  stored: LoadedLogin,
  logins: StoredLogin[],
  refused: string | undefined,
  timeoutMs: number,
  now: () => number,
): Promise<{ logins?: StoredLogin[]; value: { token: string; cached: boolean } }> {
  const { baseUrl, login } = stored;
  const current = logins.find(
    (other) => isSameLogin(other, login) && other.sessionId === login.sessionId,
  );
  if (current !== undefined && current.accessToken !== refused && isFresh(current, now)) {
    stored.login = current;
    return { value: { token: current.accessToken!, cached: false } };
  }
  const latest = current ?? login;
  // REALMGATE_CANONICAL_URL, for a login made before the CLI kept its address, is in `login`.
  const pinned = latest.canonicalUrl ?? login.canonicalUrl;
  const result = await refreshGrant(
    baseUrl,
    latest.realm,
    latest.refreshToken,
    timeoutMs,
    stored.key,
    pinned,
  );
  if (!result.ok) throw loginExpired(latest, result.error);
  const { tokens } = result;
  const renewed: StoredLogin = {
    ...latest,
    // Kept for a bound login alone: a bearer login's requests carry no proof to name it.
    ...(pinned === undefined || stored.key === undefined ? {} : { canonicalUrl: pinned }),
    // Keycloak may rotate the refresh token; the newest one is always the one to keep.
    refreshToken: tokens.refreshToken ?? latest.refreshToken,
    accessToken: tokens.accessToken,
    accessExpiresAt: new Date(now() + tokens.expiresIn * 1000).toISOString(),
  };
  stored.login = renewed;
  return {
    logins: current === undefined ? undefined : withLogin(logins, renewed),
    value: { token: tokens.accessToken, cached: false },
  };
}

const expiredLogins = new WeakSet<CliError>();

/** Whether `error` says the stored login's refresh token was refused. */
export function isLoginExpired(error: unknown): boolean {
  return error instanceof CliError && expiredLogins.has(error);
}

/** The error of a stored login whose refresh token the gateway no longer takes. */
function loginExpired(login: StoredLogin, error: string): CliError {
  const expired = new CliError(
    'api',
    `the stored login of ${login.username} (realm ${login.realm}) at ${login.gateway} has ` +
      `expired or was revoked (${error}); log in again: ` +
      `realmgate login ${login.realm} ${login.username}`,
  );
  expiredLogins.add(expired);
  return expired;
}

function describeSelector(selector: LoginSelector): string {
  const parts = [
    selector.user === undefined ? [] : ['the user --user names'],
    selector.realm === undefined ? [] : [`realm ${selector.realm}`],
  ].flat();
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}
