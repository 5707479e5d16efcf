import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { TtlLru } from '../../cache/ttl-lru.ts';
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
  maxEntries: number;
  logger: Logger;
}): ActiveCheck {
  if (options.intervalSeconds === 'off') return { ensureActive: () => Promise.resolve() };
  const intervalSeconds: number = options.intervalSeconds;
  const checkedUntil = new TtlLru<true>(options.maxEntries);
  const inFlight = new Map<string, Promise<boolean>>();

  async function isActive(key: string, token: string, principal: Principal): Promise<boolean> {
    try {
      const active = await options.tokens.isActive(principal.realm, token);
      if (active && intervalSeconds > 0)
        checkedUntil.set(key, true, Date.now() + intervalSeconds * 1000);
      return active;
    } catch (err) {
      options.logger.warn({ err }, 'token introspection failed; trusting the local verification');
      return true;
    }
  }

  return {
    async ensureActive(token, principal) {
      const key = createHash('sha256').update(token).digest('base64url');
      if (checkedUntil.get(key)) return;
      let check = inFlight.get(key);
      if (!check) {
        check = isActive(key, token, principal).finally(() => inFlight.delete(key));
        inFlight.set(key, check);
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
