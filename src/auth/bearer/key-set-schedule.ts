/**
 * When a realm's key set is fetched (jwks.ts): the rules of time, apart so that they can be
 * read, and tested, without a Keycloak.
 */

/**
 * The least time between two fetches of one realm's set that unknown `kid`s (or a forced
 * refresh) start: however many random kids arrive, Keycloak sees at most one fetch per realm
 * and this long from each process, and a token of a key just added waits at most this long
 * plus one fetch.
 */
export const UNKNOWN_KID_GAP_MS = 1000;

/** The share of the interval taken off at random, so that realms and workers spread out. */
const JITTER = 0.2;

/**
 * The wait before a realm's next background fetch: `refreshSeconds`, less up to a fifth at
 * random (`random()` in [0, 1)). Never more than `refreshSeconds`, which is what the stated
 * bound of a removed key rests on; never less than four fifths of it, which bounds Keycloak's
 * load: at most 1.25 fetches per realm in use, per process, per `refreshSeconds`.
 */
export function refreshDelayMs(refreshSeconds: number, random: () => number): number {
  return Math.round(refreshSeconds * 1000 * (1 - JITTER * random()));
}
