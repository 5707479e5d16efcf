import { TtlLru } from '../cache/ttl-lru.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * How long Keycloak's answer that a realm does not exist answers the realm's requests without
 * asking Keycloak again. A fleet of jobs still configured for a deleted organization sends
 * hundreds of requests a second; remembered 10 s, they cost Keycloak one call per realm and
 * process every 10 s instead of one each. Short, because a realm created again under the name
 * (an operator's restore) is refused until it passes: 10 s is well within the 30 s by default
 * (`KEY_SET_REFRESH_SECONDS`) that a deletion itself takes to reach tokens already verified.
 */
export const REALM_GONE_MEMORY_MS = 10_000;

/**
 * How long a gone realm is kept at all, past the span it answers for: its next "gone" is then
 * not logged again, so a fleet's steady requests log once, not once per span.
 */
const KEPT_MS = 10 * 60_000;

/**
 * How many realms are remembered. Only Keycloak's answer about a realm the gateway serves (an
 * organization that exists, checked before any Keycloak call) puts one in, so made-up names
 * never do; the bound holds memory even so, and the least recently used realm makes way.
 */
export const MAX_GONE_REALMS = 10_000;

/**
 * The one memory of realms Keycloak said it does not have (deleted there while the organization
 * stays), shared by every path that asks Keycloak about a realm: Basic logins (the grant), Bearer
 * tokens (the key set) and their re-check (introspection). Whichever path hears it first, the
 * others answer from it, and a realm's key set held is dropped (`onGone`) so that no token of it
 * is served meanwhile. Per process: nothing a client sends sets it, only Keycloak's answer.
 */
export interface GoneRealms {
  /** Whether Keycloak said within REALM_GONE_MEMORY_MS that it does not have `realm`. */
  isGone(realm: string): boolean;
  /**
   * Keycloak just said it does not have `realm`. True when that is news (not already said
   * within KEPT_MS): the caller logs it.
   */
  sawGone(realm: string): boolean;
  /**
   * Keycloak just served `realm` (a key set, a grant), or the gateway just made or changed it
   * there (an organization created again): it exists, whatever was said before.
   */
  sawServed(realm: string): void;
  /** Calls `listener` whenever Keycloak says a realm does not exist. */
  onGone(listener: (realm: string) => void): void;
  clear(): void;
}

/** Creates the memory; time is read on `clock`. */
export function createGoneRealms(clock: Clock = systemClock): GoneRealms {
  // When Keycloak last said so, per realm.
  const said = new TtlLru<number>(MAX_GONE_REALMS, clock);
  const listeners: ((realm: string) => void)[] = [];
  return {
    isGone(realm) {
      const at = said.get(realm);
      return at !== undefined && clock.now() - at < REALM_GONE_MEMORY_MS;
    },
    sawGone(realm) {
      const news = said.get(realm) === undefined;
      const now = clock.now();
      said.set(realm, now, now + KEPT_MS);
      for (const listener of listeners) listener(realm);
      return news;
    },
    sawServed(realm) {
      said.delete(realm);
    },
    onGone(listener) {
      listeners.push(listener);
    },
    clear() {
      said.clear();
    },
  };
}
