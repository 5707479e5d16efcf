import { decodeJwt } from 'jose';
import { AppError } from '../envelope/errors.ts';
import { isHttpStatus, loginAsBootstrapAdmin, type KeycloakAdmin } from './admin-client.ts';

/** A logged-in admin-API client that stays logged in. */
export interface AdminSession {
  /** The cached client, logged in again shortly before its access token expires. */
  get(): Promise<KeycloakAdmin>;
  /**
   * Runs `work` with the client and translates Keycloak's transport failures into AppErrors
   * (503/504, or 401 `401-00001` when Keycloak stopped accepting the session). Other errors,
   * including Keycloak's 4xx answers, pass through for the caller to interpret.
   */
  run<T>(work: (admin: KeycloakAdmin) => Promise<T>): Promise<T>;
}

export interface AdminSessionOptions {
  keycloakUrl: string;
  username: string;
  password: string;
  timeoutMs: number;
}

/** Renew this long before expiry, so a multi-call provisioning step never runs out of token. */
const RENEW_BEFORE_EXPIRY_MS = 10_000;
/** Keycloak's default access-token lifespan, used if a token cannot be decoded. */
const FALLBACK_LIFETIME_MS = 60_000;
/** Same hint as the /auth proxy gives when Keycloak is down. */
const RETRY_LATER = { 'Retry-After': '5' };

/**
 * Creates the session of Keycloak's bootstrap administrator (master realm, `admin-cli`).
 * Nothing happens until the first `get()`; concurrent renewals share one login.
 */
export function createAdminSession(options: AdminSessionOptions): AdminSession {
  let current: { admin: KeycloakAdmin; renewAt: number } | undefined;
  let pending: Promise<KeycloakAdmin> | undefined;

  async function login(): Promise<KeycloakAdmin> {
    const startedAt = Date.now();
    try {
      const admin = await loginAsBootstrapAdmin(options);
      current = { admin, renewAt: startedAt + renewalDelayOf(admin.accessToken) };
      return admin;
    } catch (err) {
      throw toLoginError(err);
    }
  }

  function get(): Promise<KeycloakAdmin> {
    if (current && Date.now() < current.renewAt) return Promise.resolve(current.admin);
    pending ??= login().finally(() => {
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
        throw toTransportError(err) ?? err;
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

/** The login's failures: Keycloak refusing the credentials is ours to fix, not the caller's. */
function toLoginError(err: unknown): AppError {
  const transport = toTransportError(err);
  if (transport) return transport;
  const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AppError('gatewayServiceToken', { cause: err });
  }
  return new AppError('identityProviderUnavailable', { cause: err, headers: RETRY_LATER });
}

/** Maps "Keycloak did not answer (in time)" onto 503/504; undefined for anything else. */
function toTransportError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  const name = (err as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError') {
    return new AppError('identityProviderTimeout', { cause: err });
  }
  // undici (fetch) reports refused connections, resets and DNS failures as TypeError with a cause.
  if (err instanceof TypeError && err.cause !== undefined) {
    return new AppError('identityProviderUnavailable', { cause: err, headers: RETRY_LATER });
  }
  const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
  if (status === 502 || status === 503 || status === 504) {
    return new AppError('identityProviderUnavailable', { cause: err, headers: RETRY_LATER });
  }
  return undefined;
}
