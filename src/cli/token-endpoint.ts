import { decodeJwt } from 'jose';
import * as oidc from 'openid-client';
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
  return tokenRequest(baseUrl, login.realm, timeoutMs, (config) =>
    oidc.genericGrantRequest(config, 'password', {
      scope: 'openid offline_access',
      username: login.username,
      password: login.password,
      ...(login.totp === undefined ? {} : { totp: login.totp }),
      ...login.fields,
    }),
  );
}

/** The refresh grant of spec 4.1 through the gateway's `/auth/`. */
export function refreshGrant(
  baseUrl: URL,
  realm: string,
  refreshToken: string,
  timeoutMs: number,
): Promise<GrantResult> {
  return tokenRequest(baseUrl, realm, timeoutMs, (config) =>
    oidc.refreshTokenGrant(config, refreshToken),
  );
}

/**
 * How far this computer's clock may be from Keycloak's for openid-client's checks of the ID
 * token's times: any distance. The CLI reads nothing from the ID token, and the gateway checks
 * every token's times by its own clock; a laptop whose clock is off still logs in, as before.
 */
const ANY_CLOCK_SECONDS = 10 * 365 * 24 * 3600;

/** The realms discovered by this process (a login retried, a refresh then a call). */
const discovered = new Map<string, oidc.ServerMetadata>();

/**
 * The realm's metadata, from its discovery document through the gateway. Its URL is given in
 * full: openid-client then does not compare the issuer it names, the gateway's PUBLIC_URL, with
 * REALMGATE_URL, which need not be the same (the gateway checks the issuer of every token).
 */
async function metadataOf(
  realmUrl: URL,
  clientId: string,
  gatewayFetch: oidc.CustomFetch,
): Promise<oidc.ServerMetadata> {
  const known = discovered.get(realmUrl.href);
  if (known) return known;
  const config = await oidc.discovery(
    new URL('.well-known/openid-configuration', realmUrl),
    clientId,
    undefined,
    oidc.None(),
    { [oidc.customFetch]: gatewayFetch, execute: [oidc.allowInsecureRequests] },
  );
  // Its helpers are not enumerable: a spread copies the metadata alone.
  const metadata = { ...(config.serverMetadata() as oidc.ServerMetadata) };
  discovered.set(realmUrl.href, metadata);
  return metadata;
}

/** The last answer the gateway gave, kept to describe one openid-client would not take. */
interface Answer {
  status: number;
  text: string;
}

/**
 * One grant by openid-client on the realm's API client (a public client: its id in the form),
 * after the realm's discovery, both through the gateway's `/auth/`. Its answer: the tokens, or
 * the refusal the token endpoint gave (400, or 401 for wrong credentials); anything else is a
 * CliError that says what the gateway said.
 */
async function tokenRequest(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
  grant: (config: oidc.Configuration) => Promise<oidc.TokenEndpointResponse>,
): Promise<GrantResult> {
  const last: Answer = { status: 0, text: '' };
  const realmUrl = new URL(`auth/realms/${encodeURIComponent(realm)}/`, baseUrl);
  const gatewayFetch = gatewayFetchOf(baseUrl, timeoutMs, last);
  try {
    const metadata = await metadataOf(realmUrl, apiClientIdOf(realm), gatewayFetch);
    // The token endpoint as REALMGATE_URL reaches it, whatever host Keycloak names: the
    // password and refresh token go nowhere else.
    const config = new oidc.Configuration(
      {
        ...metadata,
        token_endpoint: new URL('protocol/openid-connect/token', realmUrl).href,
      },
      apiClientIdOf(realm),
      { [oidc.clockTolerance]: ANY_CLOCK_SECONDS },
      oidc.None(),
    );
    config[oidc.customFetch] = gatewayFetch;
    oidc.allowInsecureRequests(config);
    // gatewayFetch times each request out itself.
    config.timeout = 0;
    return { ok: true, tokens: tokensOf(await grant(config), last, baseUrl) };
  } catch (error) {
    if (error instanceof oidc.ResponseBodyError) {
      const description = error.error_description ?? '';
      return { ok: false, error: printable(error.error), description: printable(description) };
    }
    const said = [error, (error as { cause?: unknown } | null)?.cause].find(
      (cause) => cause instanceof CliError,
    );
    throw said ?? unusableAnswer(last.status, objectOf(last.text), baseUrl);
  }
}

/**
 * openid-client's fetch: the request to the gateway, redirects reported and not followed (a
 * password or refresh token is never replayed to wherever one points), within `timeoutMs`.
 * What openid-client reads is a token endpoint's own answer (200, or a 400/401 refusal); the
 * gateway's throttle (429), its envelope errors (503 while Keycloak is down) and anything else
 * become a CliError here.
 */
function gatewayFetchOf(baseUrl: URL, timeoutMs: number, last: Answer): oidc.CustomFetch {
  return async (url, options) => {
    let response: Response;
    try {
      response = await fetch(url, {
        method: options.method,
        headers: options.headers,
        body: options.body,
        redirect: 'manual',
        signal: AbortSignal.timeout(timeoutMs),
      });
      last.status = response.status;
      last.text = await response.text();
    } catch (error) {
      throw describeUnreachable(error, baseUrl, timeoutMs);
    }
    const { status, text } = last;
    if (status === 200 || status === 400 || status === 401) {
      const contentType = response.headers.get('content-type');
      return new Response(text, {
        status,
        headers: contentType === null ? undefined : { 'content-type': contentType },
      });
    }
    const body = objectOf(text);
    if (status === 429 && body?.error === 'too_many_attempts') {
      throw throttled(body, response.headers.get('retry-after'));
    }
    throw unusableAnswer(status, body, baseUrl);
  };
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

/** The tokens of a grant openid-client accepted; `expires_in` is required, as the CLI caches by it. */
function tokensOf(answer: oidc.TokenEndpointResponse, last: Answer, baseUrl: URL): Tokens {
  const { access_token: accessToken, expires_in: expiresIn } = answer;
  if (accessToken === '' || typeof expiresIn !== 'number') {
    throw unusableAnswer(last.status, objectOf(last.text), baseUrl);
  }
  const refreshToken = answer.refresh_token;
  const refreshExpiresIn = answer.refresh_expires_in;
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
