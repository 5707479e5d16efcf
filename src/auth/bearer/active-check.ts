import type { Logger } from 'pino';
import type { TokenClient } from '../../keycloak/token-client.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { Principal } from '../principal.ts';
import type { RevocationList } from '../revocation.ts';

export interface ActiveCheck {
  /** Throws AuthFailure when Keycloak says the token is no longer active. */
  ensureActive(token: string, principal: Principal): Promise<void>;
}

/**
 * Catches revocations made outside the gateway (a user disabled, sessions deleted in the
 * console): each distinct token is introspected at most once per `intervalSeconds`; 0 means on
 * every request, 'off' never. An inactive token's session is revoked on every replica. When
 * Keycloak cannot be asked, the token is let through (it was verified locally): an outage of
 * Keycloak must not become an outage of the API.
 */
export function createActiveCheck(options: {
  tokens: TokenClient;
  revocations: RevocationList;
  intervalSeconds: number | 'off';
  basicCacheSeconds: number;
  logger: Logger;
}): ActiveCheck {
  if (options.intervalSeconds === 'off') return { ensureActive: () => Promise.resolve() };
  const intervalMs = options.intervalSeconds * 1000;
  // The verifier hands out one principal object per cached token, so the object itself keys
  // the memo: no second hash of the token, and entries vanish with the verifier's cache.
  const checkedUntil = new WeakMap<Principal, number>();
  const inFlight = new Map<Principal, Promise<boolean>>();

  async function isActive(token: string, principal: Principal): Promise<boolean> {
    try {
      const active = await options.tokens.isActive(principal.realm, token);
      if (active && intervalMs > 0) checkedUntil.set(principal, Date.now() + intervalMs);
      return active;
    } catch (err) {
      options.logger.warn({ err }, 'token introspection failed; trusting the local verification');
      return true;
    }
  }

  return {
    async ensureActive(token, principal) {
      if ((checkedUntil.get(principal) ?? 0) > Date.now()) return;
      let check = inFlight.get(principal);
      if (!check) {
        check = isActive(token, principal).finally(() => inFlight.delete(principal));
        inFlight.set(principal, check);
      }
      if (await check) return;
      await options.revocations.revoke({
        realm: principal.realm,
        userId: principal.userId,
        sessionIds: principal.sessionId ? [principal.sessionId] : [],
        ttlSeconds: Math.max(principal.expiresAt - Math.floor(Date.now() / 1000), 1),
        userTtlSeconds: Math.max(options.basicCacheSeconds, 1),
      });
      throw new AuthFailure('bearer', 'Token is no longer active.');
    },
  };
}
