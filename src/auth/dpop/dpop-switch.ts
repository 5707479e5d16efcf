import { AppError } from '../../envelope/errors.ts';
import type { Cache } from '../../cache/cache.ts';
import { TtlLru } from '../../cache/ttl-lru.ts';
import { REALM_GONE_MESSAGE } from '../../keycloak/realm-gone.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { within } from '../../time/within.ts';
import type { Answer } from '../answer.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { GoneRealms } from '../gone-realms.ts';

/**
 * How long a realm's DPoP switch is taken as read; Keycloak is asked again after it. A read that
 * fails keeps the last answer as long: through an outage, one admin call a minute per realm.
 */
export const SWITCH_FRESH_MS = 60_000;
/** How long a switch read once is still answered while Keycloak does not answer. */
const SWITCH_KEPT_MS = 60 * 60_000;
/** After a failed read of a switch never known, how long it is not asked again. */
const FAILED_READ_PAUSE_MS = 5_000;
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
   * The same for the admission, which never waits long: the last answer at once while Keycloak
   * is asked again in the background; a switch never read (by any process, as far as the shared
   * cache says) waited for up to `waitMs`, and when Keycloak is slower or does not answer, taken
   * as off for this request, as a token's re-check is (bearer/active-check.ts): the answer
   * applies from the next request, and until it comes the realm's next requests take it as off
   * at once. A realm Keycloak no longer has: the 401 every other refusal of its tokens answers
   * (`realm_gone`).
   */
  heldIn(realm: string): Answer<boolean>;
  /**
   * The switch as this replica just set it in Keycloak (the token-lifetimes API): taken at once
   * here; the other replicas read it within a minute.
   */
  set(realm: string, required: boolean): void;
  /**
   * The organization was deleted (on any replica): its switch is dropped here and in the shared
   * cache, so that one made again under the id at once is read afresh, not held to the old one's.
   */
  forget(realm: string): void;
}

/**
 * A token of a realm Keycloak no longer has, refused as the key set and the re-check refuse it
 * (401, not the 404 of an organization the gateway does not have).
 */
function realmGone(cause?: unknown): AuthFailure {
  return new AuthFailure('bearer', 'realm_gone', REALM_GONE_MESSAGE, { cause });
}

/** A read of Keycloak in flight for a realm. */
interface Reading {
  answer: Promise<boolean>;
  /** The switch as set through this replica since the read started: what the read answers. */
  setTo?: boolean;
  /** The realm forgotten since the read started: its answer may be the deleted realm's. */
  forgotten?: boolean;
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
  /** How long the admission waits for a switch never read (`REVOCATION_CHECK_WAIT_MS`). */
  waitMs?: number;
  /** Told each failed read of a switch never known: the admission serves without it. */
  onUnread?: (realm: string, err: unknown) => void;
  clock?: Clock;
}): DpopSwitches {
  const { clock = systemClock, shared, waitMs = 1000 } = options;
  /** When a read of a switch never known last failed, by realm. */
  const failedAt = new TtlLru<number>(MAX_REALMS, clock);
  /** `at`: when Keycloak was last asked; `keptUntil`: an hour after it last answered. */
  const switches = new TtlLru<{ required: boolean; at: number; keptUntil: number }>(
    MAX_REALMS,
    clock,
  );
  const reading = new Map<string, Reading>();
  /**
   * Realms whose first read kept a request waiting `waitMs` (Keycloak takes it and does not
   * answer), until that read settles: their next requests take the default at once rather than
   * each wait as long for the same read.
   */
  const overdue = new Map<string, Promise<unknown>>();
  const sharedKey = (realm: string) => `dpop-switch:${realm}`;

  function remember(realm: string, required: boolean, at = clock.now()): void {
    const keptUntil = clock.now() + SWITCH_KEPT_MS;
    switches.set(realm, { required, at, keptUntil }, keptUntil);
  }

  /**
   * A read of a known switch failed: its answer stands for another minute, still dropped an hour
   * after Keycloak last gave it. Asked again at once, every request of an outage would start a
   * read (a login too, while Keycloak refuses the gateway's credentials), holding connections
   * other organizations need.
   */
  function pause(realm: string): void {
    const known = switches.get(realm);
    if (known) switches.set(realm, { ...known, at: clock.now() }, known.keptUntil);
  }

  function readNow(realm: string): Promise<boolean> {
    const running = reading.get(realm);
    if (running) return running.answer;
    const read: Reading = {
      answer: options
        .read(realm)
        .then(
          (required) => {
            if (read.setTo !== undefined) return read.setTo;
            if (read.forgotten) return required;
            remember(realm, required);
            // Best effort: a cache that fails leaves the others to ask Keycloak themselves.
            shared?.set(sharedKey(realm), required ? '1' : '0', SWITCH_KEPT_MS).catch(() => {});
            return required;
          },
          (err: unknown) => {
            if (read.setTo !== undefined) return read.setTo;
            throw err;
          },
        )
        .finally(() => {
          if (reading.get(realm) === read) reading.delete(realm);
        }),
    };
    reading.set(realm, read);
    return read.answer;
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
      if (known !== undefined) {
        pause(realm);
        return known;
      }
      failedAt.set(realm, clock.now(), clock.now() + FAILED_READ_PAUSE_MS);
      options.onUnread?.(realm, err);
      throw new AppError('identityProviderUnavailable', { cause: err });
    }
  }

  /**
   * A switch this process never knew: as another process read it (the shared cache; Keycloak
   * then asked again in the background), else Keycloak's answer. Not asked again for a while
   * after it failed: a realm whose switch cannot be read costs no admin call per request.
   */
  async function firstRead(realm: string): Promise<boolean> {
    const kept = await shared?.get(sharedKey(realm)).catch(() => undefined);
    // Set through this replica (or read by a concurrent first read) while the cache answered.
    const meanwhile = switches.get(realm);
    if (meanwhile) return meanwhile.required;
    if (kept === '1' || kept === '0') {
      const required = kept === '1';
      // Taken as read a minute ago: answered at once from now on, Keycloak asked again.
      remember(realm, required, clock.now() - SWITCH_FRESH_MS);
      readAgain(realm, required).catch(() => {});
      return required;
    }
    if (failedAt.get(realm) !== undefined) throw new AppError('identityProviderUnavailable');
    return readAgain(realm, undefined);
  }

  /**
   * The first read of `realm`'s switch, or undefined when it fails or takes longer than
   * `waitMs` (then `overdue` until it settles); a realm gone is said as it is.
   */
  async function firstReadWithin(
    realm: string,
    answer: Promise<boolean>,
  ): Promise<boolean | undefined> {
    const settled = answer.catch((err: unknown) =>
      err instanceof AppError && err.code === 'organizationNotFound' ? realmGone(err) : undefined,
    );
    const outcome = await within(settled, waitMs, () => {
      overdue.set(realm, settled);
      void settled.finally(() => {
        if (overdue.get(realm) === settled) overdue.delete(realm);
      });
      return undefined;
    });
    if (outcome instanceof AuthFailure) throw outcome;
    return outcome;
  }

  return {
    requiredIn(realm) {
      if (options.gone.isGone(realm)) throw new AppError('organizationNotFound');
      const known = switches.get(realm);
      if (known && clock.now() - known.at < SWITCH_FRESH_MS) return known.required;
      return known ? readAgain(realm, known.required) : firstRead(realm);
    },
    heldIn(realm) {
      if (options.gone.isGone(realm)) throw realmGone();
      const known = switches.get(realm);
      if (known === undefined) {
        if (overdue.has(realm)) return false;
        return firstReadWithin(realm, firstRead(realm)).then((required) => required ?? false);
      }
      if (clock.now() - known.at >= SWITCH_FRESH_MS) {
        // A realm found gone is told to the shared memory by `readAgain`; an outage keeps the
        // known answer, Keycloak asked again a minute later.
        readAgain(realm, known.required).catch(() => {});
      }
      return known.required;
    },
    set(realm, required) {
      const running = reading.get(realm);
      if (running) {
        // Keycloak's answer to a read started before the change is the old setting.
        running.setTo = required;
        reading.delete(realm);
      }
      remember(realm, required);
      shared?.set(sharedKey(realm), required ? '1' : '0', SWITCH_KEPT_MS).catch(() => {});
    },
    forget(realm) {
      const running = reading.get(realm);
      if (running) {
        running.forgotten = true;
        reading.delete(realm);
      }
      switches.delete(realm);
      failedAt.delete(realm);
      overdue.delete(realm);
      // Best effort, as writing it is; every replica told of the deletion deletes it too.
      shared?.delete(sharedKey(realm)).catch(() => {});
    },
  };
}
