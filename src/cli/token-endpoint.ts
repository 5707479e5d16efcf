import { decodeJwt } from 'jose';
import { apiClientIdOf } from '../tenancy/identifiers.ts';
import { describeUnreachable, printable } from './client.ts';
import { CliError } from './errors.ts';

/** What a successful grant gives the CLI. */
export interface Tokens {
  accessToken: string;
  /** Seconds. */
  expiresIn: number;
  refreshToken?: string;
  /** Seconds; 0 or absent when Keycloak sets no limit. */
  refreshExpiresIn?: number;
}

/** A grant's outcome: tokens, or Keycloak's refusal (`invalid_grant` and the like). */
export type GrantResult =
  { ok: true; tokens: Tokens } | { ok: false; error: string; description: string };

/**
 * The password grant of spec 4.1 through the gateway's `/auth/` (offline_access: the refresh
 * token is an offline token, listed and revoked by the refresh-token endpoints).
 */
export function passwordGrant(
  baseUrl: URL,
  login: {
    realm: string;
    username: string;
    password: string;
    totp?: string;
    /** The gateway's own fields (a name, a reach: `realmgate_*`). */
    fields?: Record<string, string>;
  },
  timeoutMs: number,
): Promise<GrantResult> {
  return postTokenForm(
    baseUrl,
    login.realm,
    {
      client_id: apiClientIdOf(login.realm),
      grant_type: 'password',
      scope: 'openid offline_access',
      username: login.username,
      password: login.password,
      ...(login.totp === undefined ? {} : { totp: login.totp }),
      ...login.fields,
    },
    timeoutMs,
  );
}

/** The refresh grant of spec 4.1 through the gateway's `/auth/`. */
export function refreshGrant(
  baseUrl: URL,
  realm: string,
  refreshToken: string,
  timeoutMs: number,
): Promise<GrantResult> {
  return postTokenForm(
    baseUrl,
    realm,
    { client_id: apiClientIdOf(realm), grant_type: 'refresh_token', refresh_token: refreshToken },
    timeoutMs,
  );
}

async function postTokenForm(
  baseUrl: URL,
  realm: string,
  form: Record<string, string>,
  timeoutMs: number,
): Promise<GrantResult> {
  const path = `auth/realms/${encodeURIComponent(realm)}/protocol/openid-connect/token`;
  let status: number;
  let text: string;
  let retryAfter: string | null;
  try {
    const response = await fetch(new URL(path, baseUrl), {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: new URLSearchParams(form),
      // Never replay a password or refresh token to wherever a redirect points.
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = response.status;
    retryAfter = response.headers.get('retry-after');
    text = await response.text();
  } catch (error) {
    throw describeUnreachable(error, baseUrl, timeoutMs);
  }
  const body = objectOf(text);
  if (status === 200) {
    const tokens = tokensOf(body);
    if (tokens) return { ok: true, tokens };
  } else if ((status === 400 || status === 401) && typeof body?.error === 'string') {
    const description = typeof body.error_description === 'string' ? body.error_description : '';
    return { ok: false, error: printable(body.error), description: printable(description) };
  }
  if (status === 429 && body?.error === 'too_many_attempts') throw throttled(body, retryAfter);
  throw unusableAnswer(status, body, baseUrl);
}

/**
 * The gateway's login throttle refused the grant: say so in words, with the limit and the
 * wait it names, or at least the wait of its Retry-After.
 */
function throttled(body: Record<string, unknown>, retryAfter: string | null): CliError {
  const description = body.error_description;
  const wait = retryAfter !== null && /^\d+$/.test(retryAfter) ? ` Retry in ${retryAfter} s.` : '';
  const said =
    typeof description === 'string' && description !== ''
      ? printable(description)
      : `Too many failed logins.${wait}`;
  return new CliError('api', `error 429: login refused for now. ${said}`, undefined, 429);
}

function tokensOf(body: Record<string, unknown> | undefined): Tokens | undefined {
  const accessToken = body?.access_token;
  const expiresIn = body?.expires_in;
  if (typeof accessToken !== 'string' || accessToken === '' || typeof expiresIn !== 'number') {
    return undefined;
  }
  const refreshToken = body?.refresh_token;
  const refreshExpiresIn = body?.refresh_expires_in;
  return {
    accessToken,
    expiresIn,
    refreshToken:
      typeof refreshToken === 'string' && refreshToken !== '' ? refreshToken : undefined,
    refreshExpiresIn: typeof refreshExpiresIn === 'number' ? refreshExpiresIn : undefined,
  };
}

/** The gateway's own errors (503 when Keycloak is down) come as an envelope; say what it says. */
function unusableAnswer(
  status: number,
  body: Record<string, unknown> | undefined,
  baseUrl: URL,
): CliError {
  const { result, message, error } = body ?? {};
  if (typeof result === 'string' && typeof message === 'string') {
    return new CliError(
      'api',
      `error ${status} ${printable(result)}: ${printable(message)}`,
      undefined,
      status,
    );
  }
  const detail = typeof error === 'string' ? ` (${printable(error)})` : '';
  return new CliError(
    'api',
    `error ${status}: unexpected answer of the token endpoint at ${baseUrl.href}${detail}`,
    undefined,
    status,
  );
}

function objectOf(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A JWT's claims, read without verifying the signature: the CLI only takes its own bookkeeping
 * from them (session id, user name); the gateway verifies every token it is sent.
 */
export function unverifiedClaimsOf(jwt: string): Record<string, unknown> {
  try {
    return decodeJwt(jwt);
  } catch {
    return {};
  }
}
