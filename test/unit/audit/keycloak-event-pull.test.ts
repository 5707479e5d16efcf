import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AuditEvent } from '../../../src/audit/audit-writer.ts';
import type {
  KeycloakEventCursors,
  RealmCursors,
} from '../../../src/audit/keycloak-event-cursors.ts';
import {
  createKeycloakEventPull,
  LEASE_MS,
  SETTLE_MS,
} from '../../../src/audit/keycloak-event-pull.ts';
import type {
  KeycloakAdminEvent,
  KeycloakUserEvent,
} from '../../../src/audit/keycloak-event-records.ts';
import type { KeycloakEventSource } from '../../../src/audit/keycloak-event-source.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { loggerToRecords } from '../../helpers/log-lines.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * The pull's bookkeeping with Keycloak's list semantics written out (times inclusive, oldest
 * first, `max` per page): what Keycloak and PostgreSQL really do is shown by
 * test/integration/audit-keycloak-events.test.ts.
 */
function keycloakOf(user: KeycloakUserEvent[], admin: KeycloakAdminEvent[]): KeycloakEventSource {
  const lists = { user, admin };
  return {
    prepare: (realm) =>
      Promise.resolve({
        id: `${realm}-id`,
        gatewayUsers: new Set(realm === 'master' ? ['gateway-admin'] : ['service-account']),
        gatewayClientId: `${realm}-gateway`,
      }),
    page: (_realm, kind, fromMs, toMs, max) =>
      Promise.resolve(
        (lists[kind] as { time: number }[])
          .filter((e) => (fromMs === undefined || e.time >= fromMs) && e.time <= toMs)
          .sort((a, b) => a.time - b.time)
          .slice(0, max) as never,
      ),
  };
}

function cursorsInMemory(log: AuditEvent[]): KeycloakEventCursors & { saved?: RealmCursors } {
  const store: KeycloakEventCursors & { saved?: RealmCursors } = {
    claim: () =>
      Promise.resolve(
        store.saved ?? {
          user: { timeMs: undefined, ids: [] },
          admin: { timeMs: undefined, ids: [] },
        },
      ),
    renew: () => Promise.resolve(true),
    saveAndRelease: (_realm, _holder, cursors) => {
      store.saved = cursors;
      return Promise.resolve(true);
    },
    keptSince: (_realm, sinceMs) =>
      Promise.resolve(
        new Set(
          log.filter((e) => e.atMs >= sinceMs).map((e) => e.details.keycloakEventId as string),
        ),
      ),
  };
  return store;
}

const login = (id: string, time: number, userId = 'alice'): KeycloakUserEvent => ({
  id,
  time,
  type: 'LOGIN',
  userId,
});
const change = (id: string, time: number, userId = 'bob'): KeycloakAdminEvent => ({
  id,
  time,
  operationType: 'CREATE',
  resourceType: 'USER',
  authDetails: { realmId: 'org-a-id', userId },
});

describe('pulling Keycloak events', () => {
  const clock = manualClock(1_000_000);
  const now = clock.now() - SETTLE_MS;

  function pullOf(source: KeycloakEventSource, log: AuditEvent[], cursors = cursorsInMemory(log)) {
    return createKeycloakEventPull({
      purpose: 'audit',
      source,
      cursors,
      writer: { offer: (e) => log.push(e) > 0, flush: () => Promise.resolve() },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
  }

  it('merges both kinds in time order, passes over the gateway’s identities, takes each once', async () => {
    const user = [login('u1', 10), login('u2', 30), login('u3', 30, 'service-account')];
    const admin = [change('a1', 20), change('a2', 30, 'gateway-admin'), change('a3', 40)];
    const log: AuditEvent[] = [];
    const cursors = cursorsInMemory(log);
    const pull = pullOf(keycloakOf(user, admin), log, cursors);
    expect(await pull.pullRealm('org-a')).toBe(4);
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'a1', 'u2', 'a3']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 30, ids: ['u2', 'u3'] },
      admin: { timeMs: 40, ids: ['a3'] },
    });
    // Another event in the same millisecond as the cursor, and a later one.
    user.push(login('u4', 30), login('u5', 50));
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'a1', 'u2', 'a3', 'u4', 'u5']);
  });

  it('leaves events younger than the settling time for the next pull', async () => {
    const log: AuditEvent[] = [];
    const pull = pullOf(keycloakOf([login('old', now), login('young', now + 1)], []), log);
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['old']);
    clock.advance(1);
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['old', 'young']);
  });

  it('pages through more than a page, even when a page ends inside a millisecond', async () => {
    const user = Array.from({ length: 1200 }, (_, i) => login(`u${i}`, 100 + Math.floor(i / 3)));
    const log: AuditEvent[] = [];
    await pullOf(keycloakOf(user, []), log).pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(user.map((e) => e.id));
  });

  // Keycloak cannot be made to stamp more than a page of events with one millisecond on demand
  // (a login takes longer than that), so this paging is shown here, against Keycloak's list
  // semantics: ORDER BY time alone (its JpaEventQuery), so events of one millisecond come in
  // an order of the database's, the same from one request to the next or not, and `max` each.
  it.each(['the same each time', 'another each time'])(
    'takes every event of a millisecond that holds more than a page, in one pull and across pulls (ties in %s order)',
    async (ties) => {
      const user = [
        login('before', 99),
        ...Array.from({ length: 1200 }, (_, i) => login(`same${i}`, 100)),
        login('after', 101),
      ];
      const source: KeycloakEventSource = {
        ...keycloakOf([], []),
        page: (_realm, kind, fromMs, toMs, max) =>
          Promise.resolve(
            (kind === 'user' ? user : [])
              .filter((e) => (fromMs === undefined || e.time >= fromMs) && e.time <= toMs)
              .map((e, i) => ({ e, tie: ties === 'the same each time' ? i : Math.random() }))
              .sort((a, b) => a.e.time - b.e.time || a.tie - b.tie)
              .map(({ e }) => e)
              .slice(0, max) as never,
          ),
      };
      const log: AuditEvent[] = [];
      const cursors = cursorsInMemory(log);
      const taken = () => log.map((e) => e.details.keycloakEventId as string);
      await pullOf(source, log, cursors).pullRealm('org-a');
      expect(new Set(taken()).size).toBe(log.length);
      expect([...taken()].sort()).toEqual(user.map((e) => e.id).sort());
      // More events of the cursor's millisecond than a page: the next pull takes them all.
      user.push(...Array.from({ length: 700 }, (_, i) => login(`late${i}`, 101)));
      await pullOf(source, log, cursors).pullRealm('org-a');
      expect(new Set(taken()).size).toBe(log.length);
      expect([...taken()].sort()).toEqual(user.map((e) => e.id).sort());
    },
  );

  it('ends a pull whose millisecond never ends, asking for a bounded number of events', async () => {
    const asked: number[] = [];
    // A source that fills every answer, whatever it is asked: a Keycloak gone wrong.
    const source: KeycloakEventSource = {
      ...keycloakOf([], []),
      page: (_realm, kind, fromMs, _toMs, max) => {
        asked.push(max);
        const time = fromMs ?? 100;
        const events = Array.from({ length: kind === 'user' ? max : 0 }, (_, i) =>
          login(`t${time}-${i}`, time),
        );
        return Promise.resolve(events as never);
      },
    };
    const log: AuditEvent[] = [];
    await pullOf(source, log).pullRealm('org-a');
    expect(log.length).toBeGreaterThan(0);
    expect(Math.max(...asked)).toBe(16_000);
  });

  it('does not write again what is in the log when the cursor was not moved', async () => {
    const user = [login('u1', 10), login('u2', 20)];
    const log: AuditEvent[] = [];
    await pullOf(keycloakOf(user, []), log).pullRealm('org-a');
    // A replica that wrote them and stopped before saving its cursor: a fresh cursor store.
    await pullOf(keycloakOf(user, []), log, cursorsInMemory(log)).pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2']);
  });

  it('does not move the cursor past an event the writer refused (its spool full)', async () => {
    const user = [login('u1', 10), login('u2', 30), login('u3', 30)];
    const admin = [change('a1', 20), change('a3', 40)];
    const log: AuditEvent[] = [];
    const cursors = cursorsInMemory(log);
    // Room for two records, as after an outage that filled the spool.
    let room = 2;
    const refusing = createKeycloakEventPull({
      purpose: 'audit',
      source: keycloakOf(user, admin),
      cursors,
      writer: {
        offer: (e) => room-- > 0 && log.push(e) > 0,
        flush: () => Promise.resolve(),
      },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    await refusing.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'a1']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 10, ids: ['u1'] },
      admin: { timeMs: 20, ids: ['a1'] },
    });
    // Room again: the refused events come with the next pull, none twice.
    await pullOf(keycloakOf(user, admin), log, cursors).pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'a1', 'u2', 'u3', 'a3']);
  });

  it('takes the rest at once when its own records filled the spool and were written', async () => {
    const user = [login('u1', 10), login('u2', 30), login('u3', 30)];
    const admin = [change('a1', 20), change('a3', 40)];
    const log: AuditEvent[] = [];
    const cursors = cursorsInMemory(log);
    // A spool of two, which a flush empties.
    let spooled = 0;
    const pull = createKeycloakEventPull({
      purpose: 'audit',
      source: keycloakOf(user, admin),
      cursors,
      writer: {
        offer: (e) => spooled < 2 && ++spooled > 0 && log.push(e) > 0,
        flush: () => Promise.resolve(void (spooled = 0)),
      },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'a1', 'u2', 'u3', 'a3']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 30, ids: ['u2', 'u3'] },
      admin: { timeMs: 40, ids: ['a3'] },
    });
  });

  it('does not offer again what waits in its own spool after a write failed', async () => {
    const user = [login('u1', 10), login('u2', 20)];
    const log: AuditEvent[] = [];
    const cursors = cursorsInMemory(log);
    // A spool that the database refuses to write once (PostgreSQL down), then writes.
    const spool: AuditEvent[] = [];
    let refuse = true;
    const pull = createKeycloakEventPull({
      purpose: 'audit',
      source: keycloakOf(user, []),
      cursors,
      writer: {
        offer: (e) => spool.push(e) > 0,
        flush: () => {
          if (refuse) return Promise.reject(new Error('the database is down'));
          log.push(...spool.splice(0));
          return Promise.resolve();
        },
      },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    await expect(pull.pullRealm('org-a')).rejects.toThrow('the database is down');
    expect(cursors.saved).toBeUndefined();
    // The next pull reads the same events (its cursor did not move); what the spool holds is
    // written once, with what is new.
    refuse = false;
    user.push(login('u3', 30));
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2', 'u3']);
  });

  it('ends the pull without moving the cursor when its lease was lost before a flush', async () => {
    const user = [login('u1', 10), login('u2', 20)];
    const log: AuditEvent[] = [];
    // The lease ran out while the events were read (Keycloak slow) and another replica took it.
    let held = false;
    const renewed: string[] = [];
    const cursors = cursorsInMemory(log);
    cursors.renew = (realm, holder) => {
      renewed.push(`${realm}:${holder}`);
      return Promise.resolve(held);
    };
    const spool: AuditEvent[] = [];
    let flushes = 0;
    const { logger, records } = loggerToRecords();
    const pull = createKeycloakEventPull({
      purpose: 'audit',
      source: keycloakOf(user, []),
      cursors,
      writer: {
        offer: (e) => spool.push(e) > 0,
        flush: () => {
          flushes++;
          log.push(...spool.splice(0));
          return Promise.resolve();
        },
      },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger,
      metrics: { keycloakEventPull: () => undefined },
    });
    await pull.pullRealm('org-a');
    expect(renewed).toEqual(['org-a:test']);
    // Nothing waited for under a lease it no longer has, the cursor not moved: the other holder
    // goes on from it. What was offered waits in the spool, written as it comes.
    expect(flushes).toBe(0);
    expect(cursors.saved).toBeUndefined();
    expect(spool.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2']);
    expect(records.filter((r) => r.level === 40).map((r) => [r.realm, r.msg])).toEqual([
      ['org-a', 'keycloak events: lease lost before the records were written; the holder goes on'],
    ]);
    // Its lease back, it does not offer again what still waits in its spool.
    held = true;
    await pull.pullRealm('org-a');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 20, ids: ['u2'] },
      admin: { timeMs: undefined, ids: [] },
    });
  });

  it('without a writer (the auth area’s pull) tells every event, moves its cursor, writes none', async () => {
    const user = [login('u1', 10), login('u2', 20, 'service-account')];
    const admin = [change('a1', 15)];
    const told: string[] = [];
    const cursors = cursorsInMemory([]);
    const pull = createKeycloakEventPull({
      purpose: 'auth',
      source: keycloakOf(user, admin),
      cursors,
      seen: (_realm, events) => {
        told.push(...[...events.user, ...events.admin].map((e) => e.id));
        return Promise.resolve();
      },
      realms: () => Promise.resolve(['org-a']),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    expect(await pull.pullRealm('org-a')).toBe(0);
    // The gateway's own events too: a password it set through Keycloak is a change as well.
    expect(told).toEqual(['u1', 'u2', 'a1']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 20, ids: ['u2'] },
      admin: { timeMs: 15, ids: ['a1'] },
    });
    await pull.pullRealm('org-a');
    expect(told).toEqual(['u1', 'u2', 'a1']);
  });
});

describe('pulling Keycloak events: a realm’s lease while a flush waits', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  /**
   * The realm's cursors (`saved` once moved) under one lease, shared by the replicas, which runs
   * out as the database's does: at its time, here the (fake) system clock's.
   */
  function sharedLease(log: AuditEvent[]): KeycloakEventCursors & { saved?: RealmCursors } {
    const inMemory = cursorsInMemory(log);
    let holder: string | undefined;
    let until = 0;
    const held = (who: string) => holder === who;
    return Object.assign(inMemory, {
      claim(realm: string, who: string, leaseMs: number) {
        if (holder !== undefined && !held(who) && until >= Date.now()) {
          return Promise.resolve(undefined);
        }
        [holder, until] = [who, Date.now() + leaseMs];
        return Promise.resolve(
          inMemory.saved ?? {
            user: { timeMs: undefined, ids: [] },
            admin: { timeMs: undefined, ids: [] },
          },
        );
      },
      renew(_realm: string, who: string, leaseMs: number) {
        if (held(who)) until = Date.now() + leaseMs;
        return Promise.resolve(held(who));
      },
      saveAndRelease(_realm: string, who: string, cursors: RealmCursors) {
        if (!held(who)) return Promise.resolve(false);
        holder = undefined;
        inMemory.saved = cursors;
        return Promise.resolve(true);
      },
    });
  }

  /** A replica whose writer spools what it is offered and writes it to `log` on `flush`. */
  function replica(
    name: string,
    source: KeycloakEventSource,
    log: AuditEvent[],
    cursors: KeycloakEventCursors,
    flushing: () => Promise<void>,
  ) {
    const spool: AuditEvent[] = [];
    const pull = createKeycloakEventPull({
      purpose: 'audit',
      source,
      cursors,
      writer: {
        offer: (e) => spool.push(e) > 0,
        flush: async () => {
          await flushing();
          log.push(...spool.splice(0));
        },
      },
      realms: () => Promise.resolve(['org-a']),
      holder: name,
      clock: { now: () => Date.now() },
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    return { pull, spool };
  }

  /** A promise the test resolves. */
  function gate() {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    return { opened, open };
  }

  it('keeps the lease while a flush waits longer than it, so no other replica writes the same events', async () => {
    const keycloak = keycloakOf([login('u1', 10), login('u2', 20)], []);
    const log: AuditEvent[] = [];
    const cursors = sharedLease(log);
    // The first replica's writer waits for PostgreSQL (slow for a while, its spool full).
    const database = gate();
    const first = replica('first', keycloak, log, cursors, () => database.opened).pull;
    const pulled = first.pullRealm('org-a');
    await vi.advanceTimersByTimeAsync(LEASE_MS + 1000);
    // The second replica's round comes meanwhile: the realm is still the first's.
    const second = replica('second', keycloak, log, cursors, () => Promise.resolve()).pull;
    expect(await second.pullRealm('org-a')).toBe(0);
    database.open();
    expect(await pulled).toBe(2);
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2']);
    expect(cursors.saved).toEqual({
      user: { timeMs: 20, ids: ['u2'] },
      admin: { timeMs: undefined, ids: [] },
    });
  });

  it('offers nothing once a renewal found the lease taken while Keycloak was read', async () => {
    const events = keycloakOf([login('u1', 10), login('u2', 20)], []);
    const log: AuditEvent[] = [];
    const cursors = sharedLease(log);
    // PostgreSQL unreachable for longer than the lease: the renewals fail, it runs out.
    let unreachable = false;
    const renew = cursors.renew.bind(cursors);
    cursors.renew = (...args) =>
      unreachable ? Promise.reject(new Error('the database is unreachable')) : renew(...args);
    // The first replica's Keycloak is slow to answer meanwhile.
    const keycloak = gate();
    const slowSource: KeycloakEventSource = {
      ...events,
      page: async (...args) => {
        await keycloak.opened;
        return events.page(...args);
      },
    };
    const first = replica('first', slowSource, log, cursors, () => Promise.resolve());
    const pulled = first.pull.pullRealm('org-a');
    unreachable = true;
    await vi.advanceTimersByTimeAsync(LEASE_MS + 1000);
    // Back, the database lets the second replica take the realm and write its events.
    unreachable = false;
    const second = replica('second', events, log, cursors, () => Promise.resolve()).pull;
    expect(await second.pullRealm('org-a')).toBe(2);
    // The first one's next renewal finds the lease gone; then Keycloak answers.
    await vi.advanceTimersByTimeAsync(LEASE_MS / 3);
    keycloak.open();
    expect(await pulled).toBe(0);
    // Nothing left in its spool to be written a second time.
    expect(first.spool).toEqual([]);
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['u1', 'u2']);
  });
});
