import { checkLearnt } from './address-check.ts';
import { canonicalUrlSetting } from './canonical-address.ts';
import { readBaseUrl } from './client.ts';
import { isSameLogin, updateLogins, withLogin, type StoredLogin } from './credentials.ts';
import { CliError, usageError } from './errors.ts';
import type { CliIo, RunContext } from './io.ts';
import { promptHidden, readPipedLines, type PasswordSource } from './password.ts';
import { generateDpopKey, thumbprintOf, type DpopKey } from './dpop.ts';
import { learnGatewayAddress } from './gateway-address.ts';
import { keyFilePathOf, keyOfFile } from './key-file.ts';
import { requireCredentialsPath } from './stored-login.ts';
import {
  passwordGrant,
  realmIssuerOf,
  realmOffersDpop,
  unverifiedClaimsOf,
  type GrantResult,
} from './token-endpoint.ts';
import { revokeReplaced } from './session.ts';

/** What `realmgate login` was asked to do. */
export interface LoginCommand {
  realm: string;
  username: string;
  passwordFrom: PasswordSource;
  /** Ask for the one-time password before the first try. */
  otp: boolean;
  /** A name, a narrower reach and a shorter lifetime for the refresh token (job credentials). */
  job: JobOptions;
  /** Bind the tokens to a key of this login when the realm offers DPoP (not `--no-dpop`). */
  dpop: boolean;
  /** `--key-file`: keep the key in this file of its own (made when absent), not beside the token. */
  keyFile: string | undefined;
}

export interface JobOptions {
  name: string | undefined;
  /** Empty: every workspace of the user. */
  workspaces: string[];
  readOnly: boolean;
  expiresInSeconds: number | undefined;
}

/** The password grant's fields of the gateway for `job` (docs/tokens-and-cli.md). */
function jobFields(job: JobOptions): Record<string, string> {
  return {
    ...(job.name === undefined ? {} : { realmgate_name: job.name }),
    ...(job.workspaces.length === 0 ? {} : { realmgate_workspaces: job.workspaces.join(',') }),
    ...(job.readOnly ? { realmgate_read_only: 'true' } : {}),
    ...(job.expiresInSeconds === undefined
      ? {}
      : { realmgate_expires_in: String(job.expiresInSeconds) }),
  };
}

/**
 * Keycloak locks a user for a minute after two failed logins less than a second apart
 * (brute-force detection's quick-login check); a retry with the one-time password waits this
 * long after the refusal, so a fast paste cannot lock the account.
 */
const QUICK_LOGIN_GAP_MS = 1100;

// An authenticator app's code: 6 digits by default, 8 at most in Keycloak's OTP policies.
const OTP = /^\d{6,8}$/;

/**
 * `realmgate login <realm> <username>`: the password grant with `offline_access`, its refresh
 * token kept in the credentials file (0600). Prints the login's summary, never a token.
 */
export async function login(
  command: LoginCommand,
  { env, io, timeoutMs }: RunContext,
): Promise<unknown> {
  // Usage errors come before any request: with the gateway down, a script must still see
  // exit 2 (how it called realmgate), not exit 3 (the gateway).
  refuseUnreadablePassword(command.passwordFrom, io);
  if (command.keyFile !== undefined && !command.dpop) {
    throw usageError('--key-file keeps a DPoP key: not with --no-dpop', 'login');
  }
  const baseUrl = readBaseUrl(env.REALMGATE_URL);
  const path = requireCredentialsPath(env);
  // A broken or open credentials file, or a directory it cannot be written in (taking the
  // lock writes there), is reported before any password is asked for: after the grant, it
  // would leave an offline session nothing holds.
  await updateLogins(path, () => undefined);
  const { realm, username } = command;
  const keyFile = command.dpop ? keyFilePathOf(command.keyFile, env) : undefined;
  const dpopKey = command.dpop ? await keyIfOffered(baseUrl, realm, timeoutMs, keyFile) : undefined;
  // Before the password is read: an address refused is refused before anything is sent.
  const setting = canonicalUrlSetting(env);
  const canonical =
    dpopKey === undefined
      ? undefined
      : (setting ?? (await learntAddress(baseUrl, realm, timeoutMs)));
  const secrets = {
    ...(await readSecrets(command, io)),
    fields: jobFields(command.job),
    dpopKey,
    pinned: setting?.href,
  };
  let result = await passwordGrant(baseUrl, { realm, username, ...secrets }, timeoutMs);
  // Keycloak answers a missing one-time password exactly like a wrong password, so at a
  // terminal the CLI asks for one after a refusal; a person with none just presses Enter.
  const mayNeedOtp = (answer: GrantResult) => !answer.ok && answer.error === 'invalid_grant';
  if (mayNeedOtp(result) && secrets.totp === undefined && command.passwordFrom === 'prompt') {
    const refusedAt = Date.now();
    io.stderr.write(
      'The login was refused: a wrong password, or the account also needs a one-time password.\n',
    );
    const totp = await askOtp(io, 'One-time password (Enter if the account has none): ');
    if (totp !== undefined) {
      await (io.wait ?? sleep)(refusedAt + QUICK_LOGIN_GAP_MS - Date.now());
      result = await passwordGrant(baseUrl, { realm, username, ...secrets, totp }, timeoutMs);
    }
  }
  if (!result.ok) throw refused(result, command, secrets.totp !== undefined, baseUrl);
  const stored = storedLoginOf(result.tokens, baseUrl, command);
  // The key is kept only with the tokens it binds: a realm that answered bearer tokens to a
  // proof gets them back as bearer tokens. A key kept apart is named, with its thumbprint.
  const boundKey = result.tokens.bound ? dpopKey : undefined;
  // The address its proofs name from now on: an answer that names another is refused.
  if (boundKey !== undefined && canonical !== undefined) stored.canonicalUrl = canonical.href;
  if (boundKey !== undefined && keyFile !== undefined) {
    stored.keyFile = keyFile;
    stored.keyThumbprint = await thumbprintOf(boundKey);
  } else if (boundKey !== undefined) stored.dpopKey = boundKey;
  else if (dpopKey !== undefined) {
    io.stderr.write('realmgate: the realm answered bearer tokens to a proof; kept as such\n');
  }
  // The gateway ends the token at the lifetime asked for, whatever Keycloak's answer says.
  const asked = command.job.expiresInSeconds;
  if (asked !== undefined) {
    const end = new Date(Date.now() + asked * 1000).toISOString();
    if (!stored.refreshExpiresAt || end < stored.refreshExpiresAt) stored.refreshExpiresAt = end;
  }
  let replaced: StoredLogin | undefined;
  await updateLogins(path, (logins) => {
    replaced = logins.find((other) => isSameLogin(other, stored));
    return withLogin(logins, stored);
  });
  // One entry per gateway, realm and user: the offline session it replaces is revoked, so no
  // forgotten refresh token stays valid for a year. If it cannot be, the session left is named.
  if (replaced && replaced.sessionId !== stored.sessionId) {
    const by = { login: stored, key: boundKey, readOnly: command.job.readOnly };
    const reason = await revokeReplaced(replaced, by, { env, path, timeoutMs });
    if (reason !== undefined) {
      const id = replaced.sessionId;
      const from = by.readOnly ? ', from a login of the user that is not read-only' : '';
      io.stderr.write(
        `realmgate: could not revoke the replaced login's session ${id} (${reason}); its ` +
          `refresh token stays valid until revoked: realmgate tokens revoke ${id}${from}\n`,
      );
    }
  }
  const { job } = command;
  return {
    gateway: stored.gateway,
    realm: stored.realm,
    username: stored.username,
    session_id: stored.sessionId,
    expire_timestamp: stored.refreshExpiresAt ?? null,
    // What `tokens list` shows of a bound token; the key itself is never printed.
    dpop_jkt: boundKey === undefined ? null : await thumbprintOf(boundKey),
    ...(stored.keyFile === undefined ? {} : { key_file: stored.keyFile }),
    ...(job.name === undefined ? {} : { name: job.name }),
    ...(job.workspaces.length === 0 ? {} : { workspaces: job.workspaces }),
    ...(job.readOnly ? { read_only: true } : {}),
    credentials_file: path,
  };
}

/**
 * The key for this login when the realm's discovery document offers DPoP with the CLI's
 * algorithm: a new one, or the one in `keyFile` (made there when absent); none (bearer tokens)
 * otherwise.
 */
async function keyIfOffered(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
  keyFile: string | undefined,
): Promise<DpopKey | undefined> {
  if (!(await realmOffersDpop(baseUrl, realm, timeoutMs))) return undefined;
  return keyFile === undefined ? generateDpopKey() : keyOfFile(keyFile);
}

/**
 * The gateway's address as the answer at `baseUrl` names it, kept in the login (trust on first
 * use: REALMGATE_CANONICAL_URL names it instead); plain http through an https `baseUrl` is
 * refused. Undefined while the gateway cannot say: the login then keeps none.
 */
async function learntAddress(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
): Promise<URL | undefined> {
  // A realm whose issuer (its discovery document, read already) is under `baseUrl`: the job
  // uses the gateway's own address, and there is nothing more to ask.
  const issuer = await realmIssuerOf(baseUrl, realm, timeoutMs);
  if (issuer === new URL(`auth/realms/${encodeURIComponent(realm)}`, baseUrl).href) return baseUrl;
  const learnt = await learnGatewayAddress(baseUrl, realm, timeoutMs);
  if (learnt !== undefined) checkLearnt(learnt, baseUrl, undefined, 'exactly');
  return learnt;
}

/**
 * Refuses a password source that cannot work with this stdin: a prompt needs a terminal, and
 * `--password-stdin` at a terminal would echo the password as it is typed.
 */
function refuseUnreadablePassword(source: PasswordSource, io: CliIo): void {
  if (source === 'stdin' && io.stdin.isTTY) {
    throw usageError(
      '--password-stdin reads a pipe or a file, but stdin is a terminal; ' +
        'leave --password-stdin out to type the password without echo',
      'login',
    );
  }
  if (source === 'prompt' && !io.stdin.isTTY) {
    throw usageError(
      'no terminal to ask for the password: pipe it in with --password-stdin, ' +
        `e.g. printf '%s\\n' "$PASSWORD" | realmgate login <realm> <username> --password-stdin`,
      'login',
    );
  }
}

/** The password (prompt or first line of stdin) and the one-time password, if given up front. */
async function readSecrets(
  command: LoginCommand,
  io: CliIo,
): Promise<{ password: string; totp?: string }> {
  if (command.passwordFrom === 'stdin') {
    const [password, totp, ...more] = await readPipedLines(io.stdin, 'login');
    if (more.length > 0 || totp === '') {
      throw usageError(
        '--password-stdin: stdin holds the password and, for two-factor accounts, the ' +
          'one-time password on a second line; nothing else',
        'login',
      );
    }
    if (totp !== undefined) checkOtp(totp);
    if (command.otp && totp === undefined) {
      throw usageError('--otp with --password-stdin: the one-time password is missing', 'login');
    }
    return { password: password!, totp };
  }
  const who = `${command.username} (realm ${command.realm})`;
  const [password] = await promptHidden(io, [`Password for ${who}: `], 'login');
  if (password === '') throw usageError('the password must not be empty', 'login');
  const totp = command.otp ? await askOtp(io, 'One-time password: ') : undefined;
  if (command.otp && totp === undefined) {
    throw usageError('the one-time password must not be empty', 'login');
  }
  return { password: password!, totp };
}

async function askOtp(io: CliIo, prompt: string): Promise<string | undefined> {
  const [typed] = await promptHidden(io, [prompt], 'login');
  const totp = typed!.replace(/\s/g, '');
  if (totp === '') return undefined;
  checkOtp(totp);
  return totp;
}

function checkOtp(totp: string): void {
  // Digits only: a mistyped code is caught here, not counted by Keycloak as a failed login.
  if (!OTP.test(totp)) throw usageError('the one-time password is 6 to 8 digits', 'login');
}

function refused(
  result: Extract<GrantResult, { ok: false }>,
  command: LoginCommand,
  gaveOtp: boolean,
  baseUrl: URL,
): CliError {
  const said = result.description || result.error;
  // Keycloak compares a proof's URL with its own token endpoint (under the gateway's
  // PUBLIC_URL): say which URL the proof named and where the request went.
  if (result.proofUrl !== undefined && /\bdpop\b/i.test(`${result.error} ${said}`)) {
    return new CliError(
      'api',
      `login refused: ${said}; the proof named ${result.proofUrl} (the token endpoint the ` +
        `realm's discovery document names) and was sent through ${baseUrl.href}`,
    );
  }
  // Keycloak answers a missing one-time password as a wrong password (invalid_grant).
  const hint =
    gaveOtp || command.passwordFrom === 'prompt' || result.error !== 'invalid_grant'
      ? ''
      : '; for an account with two-factor authentication, put the one-time password on ' +
        "stdin's second line";
  return new CliError('api', `login refused: ${said}${hint}`);
}

function storedLoginOf(
  tokens: Extract<GrantResult, { ok: true }>['tokens'],
  baseUrl: URL,
  command: LoginCommand,
): StoredLogin {
  const claims = unverifiedClaimsOf(tokens.accessToken);
  const { sid, preferred_username: name } = claims;
  if (typeof sid !== 'string' || sid === '' || tokens.refreshToken === undefined) {
    throw new CliError('api', 'the token endpoint answered without a refresh token or session id');
  }
  const now = Date.now();
  const at = (seconds: number) => new Date(now + seconds * 1000).toISOString();
  return {
    gateway: baseUrl.href,
    realm: command.realm,
    username: typeof name === 'string' && name !== '' ? name : command.username.toLowerCase(),
    sessionId: sid,
    refreshToken: tokens.refreshToken,
    // 0 means the session has no end of its own.
    ...(tokens.refreshExpiresIn ? { refreshExpiresAt: at(tokens.refreshExpiresIn) } : {}),
    loggedInAt: new Date(now).toISOString(),
    accessToken: tokens.accessToken,
    accessExpiresAt: at(tokens.expiresIn),
  };
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
