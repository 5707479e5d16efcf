import type { Logger } from 'pino';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Clock } from '../time/clock.ts';
import { every } from '../time/every.ts';
import type { AuditEvent, AuditWriter } from './audit-writer.ts';
import type {
  EventCursor,
  KeycloakEventCursors,
  KeycloakEventPurpose,
  RealmCursors,
} from './keycloak-event-cursors.ts';
import {
  adminEventRecord,
  KEYCLOAK_EVENT_KINDS,
  userEventRecord,
  type KeycloakAdminEvent,
  type KeycloakUserEvent,
} from './keycloak-event-records.ts';
import type { KeycloakEventSource, RealmFacts } from './keycloak-event-source.ts';

/** One realm's pull: done, or failed (Keycloak or the database unavailable). */
export const KEYCLOAK_EVENT_PULL_OUTCOMES = ['ok', 'failed'] as const;
export type KeycloakEventPullOutcome = (typeof KEYCLOAK_EVENT_PULL_OUTCOMES)[number];

/** What the pull counts (metrics/metrics.ts implements it). */
export interface KeycloakEventMetrics {
  keycloakEventPull(outcome: KeycloakEventPullOutcome, purpose: KeycloakEventPurpose): void;
}

/** Events asked for at once. */
const PAGE = 500;
/**
 * The most events of one millisecond read (wholeMillisecond): far more than a Keycloak stamps in
 * one, and a bound on one answer's size whatever a Keycloak sends.
 */
const MILLISECOND_MAX = 32 * PAGE;
/** Events taken from one kind in one pull at most; the rest come next time. */
const MAX_PER_PULL = 5000;
/**
 * Keycloak stamps an event before its transaction ends: an event younger than this may still
 * be invisible, so a pull stops this far behind now, and no event is passed by the cursor
 * before it can be read.
 */
export const SETTLE_MS = 5000;
/**
 * A holder that stopped mid-pull blocks the realm this long at most. A pull renews it every
 * third of it while it holds it (`keepLease`), so a wait longer than this for Keycloak or the
 * writer (which, with realms pulled at once, writes their records too) keeps it all the same.
 */
export const LEASE_MS = 60_000;
/**
 * Realms a round pulls at once. A realm's pull is a handful of round trips, mostly Keycloak's
 * (its gateway client, two event pages): one after the other, a round over a few thousand
 * organizations outlasts the interval and delays every credential change by as much. Four
 * shorten a round about fourfold while adding at most four admin requests to Keycloak's load.
 * No more: each may hold one of the pool's DATABASE_POOL_SIZE (10) connections, for a
 * statement's time when the database is slow, beside the audit log's page reads and exports (up
 * to half the pool), its writer, requests and the readiness check, which would otherwise wait
 * for a connection and fail.
 */
export const REALMS_AT_ONCE = 4;

export interface KeycloakEventPull {
  /** Takes one realm's new events; how many records it made (none without a writer). */
  pullRealm(realm: string): Promise<number>;
  /**
   * Pulls every realm `realms()` names, `REALMS_AT_ONCE` at a time, in their order; a failure is
   * counted and logged, and the others go on. Once `signal` aborts (shutdown), no further realm
   * is started; the pulls in progress end.
   */
  pullAll(signal?: AbortSignal): Promise<void>;
}

/** What a pull is made of. */
export interface KeycloakEventPullDeps {
  /** Whose cursors these are: what the metric counts the pulls under. */
  purpose: KeycloakEventPurpose;
  source: KeycloakEventSource;
  cursors: KeycloakEventCursors;
  /** Where the events go as records: the audit log's pull; none for the auth area's. */
  writer?: Pick<AuditWriter, 'offer' | 'flush'>;
  realms: () => Promise<string[]>;
  /** This process, as the holder of the leases it takes. */
  holder: string;
  clock: Clock;
  logger: Logger;
  metrics: KeycloakEventMetrics;
  /**
   * Told each realm's events as they are taken, before they are written (the gateway's own
   * included); a failure fails the pull, and the next one tells the same events again.
   */
  seen?: (
    realm: string,
    events: { user: KeycloakUserEvent[]; admin: KeycloakAdminEvent[] },
  ) => Promise<void>;
}

/**
 * Takes Keycloak's events of each realm after the events taken before (the realm's cursors):
 * both kinds up to one time, told to `seen` and, with a writer, into the realm's audit log,
 * merged in time order, each written once however many replicas pull, and the cursors moved
 * only once the records are written. The events of the gateway's own Keycloak identities are
 * not written: the gateway already recorded each of its changes, with the person who asked.
 */
export function createKeycloakEventPull(deps: KeycloakEventPullDeps): KeycloakEventPull {
  const { source, cursors, writer, holder, purpose } = deps;
  /**
   * The events this process's spool took whose write then failed: the cursor did not move, so
   * the next pull reads them again, while the spool still holds them and writes them once the
   * database is back. The log cannot tell of them yet (`keptSince`); this does, until a write
   * succeeds (a flush writes everything spooled before it). Shared by the realms pulled at once:
   * a flush that succeeds forgets only the ids noted before it began (each offered before it, so
   * written by it), not those another realm's failed flush noted meanwhile, which may have been
   * offered after it began and still wait in the spool.
   */
  const spooledUnwritten = new Set<string>();

  async function pullRealm(realm: string): Promise<number> {
    const facts = await source.prepare(realm);
    const master = realm === MASTER_REALM ? facts : await source.prepare(MASTER_REALM);
    if (!facts || !master) return 0;
    const before = await cursors.claim(realm, holder, LEASE_MS);
    if (!before) return 0;
    const lease = keepLease(realm);
    try {
      return await pullHeld(realm, before, facts, master, lease);
    } finally {
      await lease.stop();
    }
  }

  /**
   * Keeps this process's lease of `realm` while its pull holds it, renewed every third of it:
   * another replica that took it meanwhile would take the same events again, those waiting in
   * our spool too (its keptSince cannot see them before they are written; the writer then passes
   * over the second copy, audit-batch.ts `unwrittenOf`, but the pull would be done twice).
   * `held` is false once a renewal found it taken; it stays so.
   */
  function keepLease(realm: string): Lease {
    let held = true;
    // Renewals may overlap (the timer's and a flush's): a lease found lost stays lost.
    const renew = async () => {
      if (!held) return false;
      const renewed = await cursors.renew(realm, holder, LEASE_MS);
      held &&= renewed;
      return held;
    };
    const renewing = every(LEASE_MS / 3, renew, {
      onError: (err) =>
        deps.logger.warn(
          { err, realm, purpose },
          'keycloak events: lease not renewed; tried again',
        ),
    });
    return { held: () => held, renew, stop: () => renewing.stop() };
  }

  /** The pull of `realm` from `before`, its lease held: how many records it made. */
  async function pullHeld(
    realm: string,
    before: RealmCursors,
    facts: RealmFacts,
    master: RealmFacts,
    lease: Lease,
  ): Promise<number> {
    let until = deps.clock.now() - SETTLE_MS;
    const users = await readSince(realm, 'user', before.user, until);
    // A capped read ends with a whole millisecond: what comes after it is for the next pull.
    if (users.capped) until = Math.min(until, users.events.at(-1)!.time);
    const admins = await readSince(realm, 'admin', before.admin, until);
    if (admins.capped) until = Math.min(until, admins.events.at(-1)!.time);
    const taken = {
      user: users.events.filter((e) => e.time <= until) as KeycloakUserEvent[],
      admin: admins.events.filter((e) => e.time <= until) as KeycloakAdminEvent[],
    };
    await deps.seen?.(realm, taken);
    const { written, refusedAt, lost } = writer
      ? await writeRecords(realm, taken, facts, master, writer, lease)
      : { written: 0, refusedAt: undefined, lost: false };
    if (lost) {
      // Another replica took the realm (our lease ran out, no renewal getting through to a database
      // down or slow): it goes on from the cursors as they are. What we offered waits in our spool.
      deps.logger.warn(
        { realm, purpose },
        'keycloak events: lease lost before the records were written; the holder goes on',
      );
      return written;
    }
    if (refusedAt !== undefined) {
      // The writer refused a record even with its spool written (full again of other records,
      // as under a flood of refusals while PostgreSQL is slow): the cursors stop
      // before its millisecond, so the next pull takes it again from Keycloak (which keeps it for
      // days) rather than pass it for good. Those of that millisecond already written are found
      // in the log then and not written twice.
      taken.user = taken.user.filter((e) => e.time < refusedAt);
      taken.admin = taken.admin.filter((e) => e.time < refusedAt);
      deps.logger.warn({ realm, purpose }, 'keycloak events: the audit spool is full; next time');
    }
    const after: RealmCursors = {
      user: advance(before.user, taken.user),
      admin: advance(before.admin, taken.admin),
    };
    // No renewal after the lease is given back (one would find it gone).
    await lease.stop();
    if (!(await cursors.saveAndRelease(realm, holder, after))) {
      deps.logger.warn({ realm, purpose }, 'keycloak events: lease lost before the cursor moved');
    }
    return written;
  }

  /**
   * Writes the records of `taken` not already in the log, in time order, up to the first the
   * writer refuses: how many it made, and the time of the one refused; `lost` when the lease was
   * found lost before a record was offered or before a flush (nothing more offered, nothing
   * waited for).
   */
  async function writeRecords(
    realm: string,
    taken: { user: KeycloakUserEvent[]; admin: KeycloakAdminEvent[] },
    facts: RealmFacts,
    master: RealmFacts,
    writer: Pick<AuditWriter, 'offer' | 'flush'>,
    lease: Lease,
  ): Promise<{ written: number; refusedAt: number | undefined; lost: boolean }> {
    const gateway = new Set([...facts.gatewayUsers, ...master.gatewayUsers]);
    const realmNames = new Map([
      [facts.id, realm],
      [master.id, MASTER_REALM],
    ]);
    const records: AuditEvent[] = [
      ...taken.user
        .filter((e) => !gateway.has(e.userId ?? ''))
        .map((e) => userEventRecord(realm, e)),
      ...taken.admin
        .filter((e) => !gateway.has(e.authDetails?.userId ?? ''))
        .map((e) => adminEventRecord(realm, e, realmNames)),
    ].sort((a, b) => a.atMs - b.atMs);
    let written = records.length;
    let refusedAt: number | undefined;
    let lost = false;
    if (records.length > 0) {
      const kept = await cursors.keptSince(realm, records[0]!.atMs);
      const offered: string[] = [];
      // Offered but not written (the write failed, or the lease was lost before it): our spool
      // still holds them, and the next pull does not offer them again.
      const noteOffered = () => {
        for (const id of offered) spooledUnwritten.add(id);
      };
      // Nothing is waited for under a lease found lost, renewed here too so that a flush (which
      // may wait for many realms' records) learns it at once. False when it was lost already.
      const flush = async (): Promise<boolean> => {
        let noted: string[];
        try {
          if (!(await lease.renew())) {
            noteOffered();
            return false;
          }
          noted = [...spooledUnwritten];
          await writer.flush();
        } catch (err) {
          noteOffered();
          throw err;
        }
        for (const id of noted) spooledUnwritten.delete(id);
        return true;
      };
      // A renewal found the lease taken while Keycloak was read: its holder takes these events.
      if (!lease.held()) return { written: 0, refusedAt: undefined, lost: true };
      for (const [i, record] of records.entries()) {
        const id = record.details.keycloakEventId as string;
        if (kept.has(id) || spooledUnwritten.has(id)) continue;
        if (writer.offer(record)) {
          offered.push(id);
          continue;
        }
        // A full spool is most often full of this pull's own records (a realm with more new
        // events than the spool holds): once they are written it has room, and the rest is
        // taken now. Left for the next pull, it would wait a round over every realm.
        if (!(await flush()) || !lease.held()) {
          written = i;
          lost = true;
          break;
        }
        if (writer.offer(record)) {
          offered.push(id);
          continue;
        }
        written = i;
        refusedAt = record.atMs;
        break;
      }
      // The cursors move once the records are in the log; a failure here keeps the lease until
      // it runs out, so no other replica takes these events while they wait in our spool.
      if (!lost && !(await flush())) lost = true;
    }
    return { written, refusedAt, lost };
  }

  /**
   * The events of one kind after `cursor`, up to `until`, each millisecond whole; `capped` when
   * more remain after the last one's millisecond.
   */
  async function readSince(
    realm: string,
    kind: (typeof KEYCLOAK_EVENT_KINDS)[number],
    cursor: EventCursor,
    until: number,
  ): Promise<{ events: { id: string; time: number }[]; capped: boolean }> {
    const events: { id: string; time: number }[] = [];
    let from = cursor.timeMs;
    let seenAtFrom = new Set(cursor.ids);
    const fresh = (e: { id: string; time: number }) => !(e.time === from && seenAtFrom.has(e.id));
    while (events.length < MAX_PER_PULL) {
      const page = await source.page(realm, kind, from, until, PAGE);
      if (page.length < PAGE) {
        events.push(...page.filter(fresh));
        return { events, capped: false };
      }
      // A full page: every event before its last millisecond is in it (oldest first), but that
      // millisecond may hold more than the page has room for. It is read whole, by itself:
      // Keycloak orders by time alone, so the next page from it (or one at an offset) could
      // repeat some of its events and never show others, and stepping past it would lose them.
      const last = page.at(-1)!.time;
      events.push(...page.filter((e) => e.time < last && fresh(e)));
      events.push(...(await wholeMillisecond(realm, kind, last)).filter(fresh));
      from = last + 1;
      seenAtFrom = new Set();
    }
    return { events, capped: true };
  }

  /**
   * Every event of one kind stamped `time`: asked with a `max` that grows until it is all, up to
   * `MILLISECOND_MAX`, past which the rest of that millisecond is skipped, and said.
   */
  async function wholeMillisecond(
    realm: string,
    kind: (typeof KEYCLOAK_EVENT_KINDS)[number],
    time: number,
  ): Promise<{ id: string; time: number }[]> {
    for (let max = 2 * PAGE; ; max = Math.min(max * 4, MILLISECOND_MAX)) {
      const all = await source.page(realm, kind, time, time, max);
      if (all.length < max) return all;
      if (max === MILLISECOND_MAX) {
        deps.logger.warn(
          { realm, kind, time, read: all.length, purpose },
          'keycloak events: more in one millisecond than are read; the rest of it skipped',
        );
        return all;
      }
    }
  }

  // One pull of a realm at a time in this process too: the lease is this process's, whichever
  // of its pulls holds it.
  const inFlight = new Map<string, Promise<number>>();
  const pullOnce = (realm: string): Promise<number> => {
    let pull = inFlight.get(realm);
    if (!pull) {
      pull = pullRealm(realm).finally(() => inFlight.delete(realm));
      inFlight.set(realm, pull);
    }
    return pull;
  };

  return {
    pullRealm: pullOnce,
    async pullAll(signal) {
      if (signal?.aborted) return;
      let realms: string[];
      try {
        realms = await deps.realms();
      } catch (err) {
        deps.metrics.keycloakEventPull('failed', purpose);
        deps.logger.warn({ err, purpose }, 'keycloak events: realms unknown; next time');
        return;
      }
      // Workers taking the next realm from one list: a slow realm holds up one of them only. A
      // stopped round takes none further: shutdown waits for the pulls in progress only, and no
      // pull starts against a writer and a pool being closed.
      const next = realms.values();
      const worker = async () => {
        for (const realm of next) {
          if (signal?.aborted) return;
          try {
            await pullOnce(realm);
            deps.metrics.keycloakEventPull('ok', purpose);
          } catch (err) {
            deps.metrics.keycloakEventPull('failed', purpose);
            deps.logger.warn({ err, realm, purpose }, 'keycloak events: pull failed; next time');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(REALMS_AT_ONCE, realms.length) }, worker));
    },
  };
}

/** A pull's hold of its realm's lease (`keepLease`). */
interface Lease {
  held(): boolean;
  /** Renews it now; false if it was found lost (now or before). */
  renew(): Promise<boolean>;
  /** Ends the renewals, once the one in progress has ended. */
  stop(): Promise<void>;
}

/** The cursor after `events` (oldest first) were taken. */
function advance(cursor: EventCursor, events: { id: string; time: number }[]): EventCursor {
  const last = events.at(-1)?.time;
  if (last === undefined) return cursor;
  const ids = events.filter((e) => e.time === last).map((e) => e.id);
  return { timeMs: last, ids: last === cursor.timeMs ? [...cursor.ids, ...ids] : ids };
}
