import { decodeJwt } from 'jose';
import { AppError } from '../envelope/errors.ts';
import {
  httpStatusOf,
  isHttpStatus,
  loginAsBootstrapAdmin,
  type KeycloakAdmin,
} from './admin-client.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { isRealmGoneLogin, isRealmMissing } from './realm-gone.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * A logged-in admin-API client that stays logged in: the bootstrap administrator's
 * (`createAdminSession`), and the gateway's service account in each realm (service-admin.ts).
 */
export interface AdminSession {
  /** The cached client, logged in again shortly before its access token expires. */
  get(): Promise<KeycloakAdmin>;
  /**
   * Runs `work` with the client. Its requests fail as the client layer translates them
   * (503/504/502); 401 becomes `401-00001` (Keycloak stopped accepting the session, which is
   * dropped); a realm missing (also at the login) `404-00001`. Keycloak's other 4xx answers
   * are for `work` to interpret; one it lets through is `502-11001`.
   */
  run<T>(work: (admin: KeycloakAdmin) => Promise<T>): Promise<T>;
}

export interface AdminSessionOptions {
  /** The client layer, which knows Keycloak's address and the timeout. */
  calls: KeycloakCalls;
  username: string;
  password: string;
  clock?: Clock;
}

/** Renew this long before expiry, so a multi-call provisioning step never runs out of token. */
const RENEW_BEFORE_EXPIRY_MS = 15_000;
/** Keycloak's default access-token lifespan, used if a token cannot be decoded. */
const FALLBACK_LIFETIME_MS = 60_000;

/**
 * Creates the session of Keycloak's bootstrap administrator (master realm, `admin-cli`).
 * Nothing happens until the first `get()`.
 */
export function createAdminSession(options: AdminSessionOptions): AdminSession {
  return renewingSession(
    () =>
      loginAsBootstrapAdmin({
        keycloakUrl: options.calls.keycloakUrl,
        timeoutMs: options.calls.timeoutMs,
        ...options,
      }),
    options.clock,
  );
}

/**
 * Keeps the client `login` gives logged in: cached until shortly before its token expires, then
 * logged in again (concurrent renewals share one login); dropped when Keycloak answers 401.
 * Keycloak refusing the login (4xx) is `401-00001`: the gateway's credentials are ours to fix,
 * not the caller's. Nothing happens until the first `get()`.
 */
export function renewingSession(
  login: () => Promise<KeycloakAdmin>,
  clock: Clock = systemClock,
): AdminSession {
  let current: { admin: KeycloakAdmin; renewAt: number } | undefined;
  let pending: Promise<KeycloakAdmin> | undefined;

  async function renew(): Promise<KeycloakAdmin> {
    const startedAt = clock.now();
    try {
      const admin = await login();
      current = { admin, renewAt: startedAt + renewalDelayOf(admin.accessToken) };
      return admin;
    } catch (err) {
      throw toLoginError(err);
    }
  }

  function get(): Promise<KeycloakAdmin> {
    if (current && clock.now() < current.renewAt) return Promise.resolve(current.admin);
    pending ??= renew().finally(() => {
      pending = undefined;
    });
    return pending;
  }

  return {
    get,
    async run(work) {
      const admin = await get();
      try {
        return await work(admin);
      } catch (err) {
        if (isHttpStatus(err, 401)) {
          // The token was revoked or Keycloak restarted with new keys: log in afresh next time.
          if (current?.admin === admin) current = undefined;
          throw new AppError('gatewayServiceToken', { cause: err });
        }
        // An organization whose realm is gone (a delete that stopped after Keycloak, a realm
        // deleted in Keycloak's console) names nothing there to act on: 404, not a 500.
        if (isRealmMissing(err)) throw new AppError('organizationNotFound', { cause: err });
        // Any other answer of Keycloak (a 4xx: the client layer translated its 5xx) that `work`
        // did not make its own error is one the gateway cannot use: 502, Keycloak's words only
        // in the log, never a 500 nor in the body.
        if (httpStatusOf(err) !== undefined) {
          throw new AppError('identityProviderBadGateway', { cause: err });
        }
        throw err;
      }
    },
  };
}

/**
 * How long to keep a fresh token, measured on our clock from the login: `exp - iat` rather than
 * `exp` itself, so that a skew between our clock and Keycloak's does not matter.
 */
function renewalDelayOf(accessToken: string | undefined): number {
  const lifetimeMs = lifetimeOf(accessToken) ?? FALLBACK_LIFETIME_MS;
  return Math.max(lifetimeMs - RENEW_BEFORE_EXPIRY_MS, lifetimeMs / 2);
}

function lifetimeOf(accessToken: string | undefined): number | undefined {
  try {
    const { exp, iat } = decodeJwt(accessToken ?? '');
    if (exp === undefined || iat === undefined || exp <= iat) return undefined;
    return (exp - iat) * 1000;
  } catch {
    return undefined;
  }
}

/**
 * The login's failures: the layer has translated Keycloak's own (503/504/502); Keycloak refusing
 * the credentials (4xx) is ours to fix, not the caller's. A realm that does not exist (the
 * service account logs in to the organization's realm) is `404-00001`, as its calls answer.
 */
function toLoginError(err: unknown): unknown {
  if (isRealmGoneLogin(err)) return new AppError('organizationNotFound', { cause: err });
  const status = httpStatusOf(err);
  if (status !== undefined && status >= 400 && status < 500) {
    return new AppError('gatewayServiceToken', { cause: err });
  }
  return err;
}
