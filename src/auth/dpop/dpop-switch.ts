import { AppError } from '../../envelope/errors.ts';
import type { Cache } from '../../cache/cache.ts';
import { TtlLru } from '../../cache/ttl-lru.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import type { Answer } from '../answer.ts';
import type { GoneRealms } from '../gone-realms.ts';

/** How long a realm's DPoP switch is taken as read; Keycloak is asked again after it. */
export const SWITCH_FRESH_MS = 60_000;
/** How long a switch read once is still answered while Keycloak does not answer. */
const SWITCH_KEPT_MS = 60 * 60_000;
const MAX_REALMS = 10_000;

/**
 * Each realm's DPoP switch ("OAuth 2.0 DPoP Bound Access Tokens Enabled" on its API client,
 * `dpop.bound.access.tokens`), as one memory for whatever reads it: the resource metadata
 * publishes it, the admission enforces it on `/api`, so both say the same.
 */
export interface DpopSwitches {
  /**
   * Whether the realm's API client requires DPoP: at once while the last answer is fresh, else
   * a promise of Keycloak's (one read in flight per realm, however many ask). Through an outage
   * the last answer (kept an hour, by this process or, through the shared cache, another);
   * never read and Keycloak silent: rejects with `identityProviderUnavailable`. A realm
   * Keycloak no longer has: `organizationNotFound`.
   */
  requiredIn(realm: string): Answer<boolean>;
  /**
   * The same for the admission, which does not wait for a fresh answer once it has one: the
   * last answer at once while Keycloak is asked again in the background (a Bearer request is
   * never held up by Keycloak, slow or down, for a switch this process knows).
   */
  heldIn(realm: string): Answer<boolean>;
  /**
   * The switch as this replica just set it in Keycloak (the token-lifetimes API): taken at once
   * here; the other replicas read it within a minute.
   */
  set(realm: string, required: boolean): void;
}

export function createDpopSwitches(options: {
  /** Asks Keycloak's admin API (rejects `organizationNotFound` for a realm it does not have). */
  read: (realm: string) => Promise<boolean>;
  /** The realms Keycloak said it does not have (gone-realms.ts), shared with every path. */
  gone: GoneRealms;
  /**
   * Where each answer is kept for the other workers and replicas (the gateway's cache): a
   * worker started again during an outage, or one that never served the realm, knows it there.
   */
  shared?: Cache;
  clock?: Clock;
}): DpopSwitches {
  const { clock = systemClock, shared } = options;
  const switches = new TtlLru<{ required: boolean; at: number }>(MAX_REALMS, clock);
  const reading = new Map<string, Promise<boolean>>();
  const sharedKey = (realm: string) => `dpop-switch:${realm}`;

  function remember(realm: string, required: boolean): void {
    switches.set(realm, { required, at: clock.now() }, clock.now() + SWITCH_KEPT_MS);
  }

  function readNow(realm: string): Promise<boolean> {
    let read = reading.get(realm);
    if (!read) {
      read = options
        .read(realm)
        .then((required) => {
          remember(realm, required);
          // Best effort: a cache that fails leaves the others to ask Keycloak themselves.
          shared?.set(sharedKey(realm), required ? '1' : '0', SWITCH_KEPT_MS).catch(() => {});
          return required;
        })
        .finally(() => reading.delete(realm));
      reading.set(realm, read);
    }
    return read;
  }

  async function readAgain(realm: string, known: boolean | undefined): Promise<boolean> {
    try {
      return await readNow(realm);
    } catch (err) {
      // The realm deleted in Keycloak while the organization stays: final, not an outage.
      if (err instanceof AppError && err.code === 'organizationNotFound') {
        switches.delete(realm);
        options.gone.sawGone(realm);
        throw err;
      }
      if (known !== undefined) return known;
      const kept = await shared?.get(sharedKey(realm)).catch(() => undefined);
      if (kept === '1' || kept === '0') {
        // Taken as read a minute ago: answered at once from now on, Keycloak asked again.
        const required = kept === '1';
        const at = clock.now() - SWITCH_FRESH_MS;
        switches.set(realm, { required, at }, clock.now() + SWITCH_KEPT_MS);
        return required;
      }
      throw new AppError('identityProviderUnavailable', { cause: err });
    }
  }

  return {
    requiredIn(realm) {
      if (options.gone.isGone(realm)) throw new AppError('organizationNotFound');
      const known = switches.get(realm);
      if (known && clock.now() - known.at < SWITCH_FRESH_MS) return known.required;
      return readAgain(realm, known?.required);
    },
    heldIn(realm) {
      if (options.gone.isGone(realm)) throw new AppError('organizationNotFound');
      const known = switches.get(realm);
      if (known === undefined) return readAgain(realm, undefined);
      if (clock.now() - known.at >= SWITCH_FRESH_MS) {
        // A realm found gone is told to the shared memory by `readAgain`; an outage changes
        // nothing: the known answer stays until Keycloak answers.
        readAgain(realm, known.required).catch(() => {});
      }
      return known.required;
    },
    set(realm, required) {
      remember(realm, required);
      shared?.set(sharedKey(realm), required ? '1' : '0', SWITCH_KEPT_MS).catch(() => {});
    },
  };
}
