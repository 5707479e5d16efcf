import { callApi } from './client.ts';
import type { ApiRequest, SessionCommand } from './commands.ts';
import { updateLogins, withoutLogin, type StoredLogin } from './credentials.ts';
import { CliError } from './errors.ts';
import type { CliIo } from './main.ts';
import {
  accessTokenOf,
  callAs,
  findStoredLogin,
  isLoginExpired,
  resolveCaller,
  type Caller,
} from './stored-login.ts';

/** What a session command prints on stdout: JSON data, a bare access token, or nothing. */
export type SessionOutput = { json: unknown } | { text: string } | { nothing: true };

/**
 * `token`, `tokens list|revoke` and `logout` (`login` is in login.ts). Notes for the user go to
 * stderr; stdout carries only what a script reads.
 */
export async function runSession(
  command: Exclude<SessionCommand, { name: 'login' }>,
  env: Record<string, string | undefined>,
  io: CliIo,
  timeoutMs: number,
): Promise<SessionOutput> {
  switch (command.name) {
    case 'token': {
      const stored = await findStoredLogin(env, command.select);
      return { text: (await accessTokenOf(stored, timeoutMs)).token };
    }
    case 'tokens list':
    case 'tokens revoke':
      return { json: await manageTokens(command, env, io, timeoutMs) };
    case 'logout':
      await logout(command, env, io, timeoutMs);
      return { nothing: true };
  }
}

async function manageTokens(
  command: Extract<SessionCommand, { name: 'tokens list' | 'tokens revoke' }>,
  env: Record<string, string | undefined>,
  io: CliIo,
  timeoutMs: number,
): Promise<unknown> {
  const caller = await resolveCaller(
    env,
    command.select,
    'no credentials: log in with realmgate login <realm> <username>, or set REALMGATE_TOKEN, ' +
      'or REALMGATE_USERNAME and REALMGATE_PASSWORD (with --realm for an organization user)',
  );
  const realm = caller.kind === 'stored' ? caller.login.realm : (command.select.realm ?? 'master');
  const path = refreshTokensPath(realm);
  if (command.name === 'tokens list') return callAs(caller, { method: 'GET', path }, timeoutMs);
  const { id } = command;
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

/**
 * Revokes the stored login's offline session alone (`DELETE .../refresh_tokens/<sid>`; the
 * gateway also refuses its access tokens at once on every replica) and forgets it. A session
 * that is already gone is simply forgotten.
 */
async function logout(
  command: Extract<SessionCommand, { name: 'logout' }>,
  env: Record<string, string | undefined>,
  io: CliIo,
  timeoutMs: number,
): Promise<void> {
  const stored = await findStoredLogin(env, command.select);
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

/** Revokes one offline session of `login`'s user with `login`'s credentials. */
export async function revokeSession(
  login: StoredLogin,
  sessionId: string,
  timeoutMs: number,
): Promise<void> {
  const request: ApiRequest = { method: 'DELETE', path: sessionPath(login, sessionId) };
  const authorization = `Bearer ${login.accessToken ?? ''}`;
  await callApi(request, { baseUrl: new URL(login.gateway), authorization }, timeoutMs);
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
    realm === 'master' ? '/api/platform' : `/api/${encodeURIComponent(realm)}/platform`;
  return `${prefix}/users/_current/refresh_tokens`;
}

function sessionPath(login: StoredLogin, sessionId: string): string {
  return `${refreshTokensPath(login.realm)}/${encodeURIComponent(sessionId)}`;
}

function describe(login: StoredLogin): string {
  return `${login.username} (realm ${login.realm}) at ${login.gateway}`;
}
