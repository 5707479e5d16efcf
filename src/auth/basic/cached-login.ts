import type { Principal } from '../../tenancy/principal.ts';

/**
 * A Basic login Keycloak verified, as cached (under the login's HMAC, never the password), with
 * its two deadlines, both epoch ms and both counted from the grant that verified it:
 * - `until`: served without asking Keycloak (BASIC_CACHE_MAX_SECONDS);
 * - `keptUntil`: served only while no Keycloak node can be reached (BASIC_OUTAGE_MAX_SECONDS),
 *   so a long outage is not a Basic outage. Never before `until`.
 * Neither goes past the expiry of the token the login got.
 */
export interface CachedLogin {
  principal: Principal;
  until: number;
  keptUntil: number;
}

/** The two bounds of a cached login, in seconds (see `CachedLogin`). */
export interface CachedLoginBounds {
  cacheSeconds: number;
  outageSeconds: number;
}

/** The login to cache for `principal`, verified at `now`; undefined if it may not be cached. */
export function cachedLoginOf(
  principal: Principal,
  bounds: CachedLoginBounds,
  now: number,
): CachedLogin | undefined {
  const tokenEnd = principal.expiresAt * 1000;
  const until = Math.min(now + bounds.cacheSeconds * 1000, tokenEnd);
  if (until <= now) return undefined;
  const keptUntil = Math.min(now + longestServedSeconds(bounds) * 1000, tokenEnd);
  return { principal, until, keptUntil };
}

/**
 * The longest a cached login may be served after its grant: a user's revocation must be
 * remembered this long to void every login cached before it (RevocationList.userRevokedAt).
 */
export function longestServedSeconds(bounds: CachedLoginBounds): number {
  return bounds.cacheSeconds === 0 ? 0 : Math.max(bounds.cacheSeconds, bounds.outageSeconds);
}

/**
 * A cached login as read back from the shared cache, or undefined for anything else (e.g. an
 * entry of another shape). An entry from a replica that predates `keptUntil` is kept no longer
 * than its `until`.
 */
export function parseCachedLogin(value: string): CachedLogin | undefined {
  let login: Partial<CachedLogin> | null;
  try {
    login = JSON.parse(value) as Partial<CachedLogin> | null;
  } catch {
    return undefined;
  }
  if (typeof login?.until !== 'number' || typeof login.principal?.expiresAt !== 'number') {
    return undefined;
  }
  const keptUntil = typeof login.keptUntil === 'number' ? login.keptUntil : login.until;
  return { principal: login.principal, until: login.until, keptUntil };
}
