import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../../src/audit/audit-writer.ts';
import type {
  KeycloakEventCursors,
  RealmCursors,
} from '../../../src/audit/keycloak-event-cursors.ts';
import {
  createKeycloakEventPull,
  REALMS_AT_ONCE,
  SETTLE_MS,
  type KeycloakEventPullDeps,
} from '../../../src/audit/keycloak-event-pull.ts';
import type { KeycloakUserEvent } from '../../../src/audit/keycloak-event-records.ts';
import type { KeycloakEventSource } from '../../../src/audit/keycloak-event-source.ts';
import { DATABASE_POOL_SIZE } from '../../../src/db/pool-size.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { loggerToRecords } from '../../helpers/log-lines.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * A round over many realms (pullAll): realms pulled a few at a time, not one after the other,
 * so that a round over thousands of organizations still ends within the interval; and the
 * audit writer those realms share neither loses nor doubles a record. keycloak-event-pull.test.ts
 * shows one realm's pull.
 */

const login = (id: string, time: number): KeycloakUserEvent => ({
  id,
  time,
  type: 'LOGIN',
  userId: 'alice',
});

/** Each realm's user events (`events`, by realm), as Keycloak lists them; no admin events. */
function keycloakOf(
  events: Record<string, KeycloakUserEvent[]>,
  beforePage: (realm: string) => Promise<void> = () => Promise.resolve(),
): KeycloakEventSource {
  return {
    prepare: (realm) =>
      Promise.resolve({
        id: `${realm}-id`,
        gatewayUsers: new Set<string>(),
        gatewayClientId: `${realm}-gateway`,
      }),
    page: async (realm, kind, fromMs, toMs, max) => {
      await beforePage(realm);
      const list = kind === 'user' ? (events[realm] ?? []) : [];
      return list
        .filter((e) => (fromMs === undefined || e.time >= fromMs) && e.time <= toMs)
        .slice(0, max) as never;
    },
  };
}

/** Each realm's cursors in memory; `holding` counts the realms whose lease is held now. */
function cursorsOf(log: AuditEvent[]) {
  const saved = new Map<string, RealmCursors>();
  const state = { holding: 0, mostHeld: 0, released: [] as string[] };
  const cursors: KeycloakEventCursors = {
    async claim(realm) {
      state.holding++;
      state.mostHeld = Math.max(state.mostHeld, state.holding);
      await turn();
      return (
        saved.get(realm) ?? {
          user: { timeMs: undefined, ids: [] },
          admin: { timeMs: undefined, ids: [] },
        }
      );
    },
    renew: () => Promise.resolve(true),
    async saveAndRelease(realm, _holder, after) {
      await turn();
      saved.set(realm, after);
      state.holding--;
      state.released.push(realm);
      return true;
    },
    keptSince: (realm, sinceMs) =>
      Promise.resolve(
        new Set(
          log
            .filter((e) => e.org === realm && e.atMs >= sinceMs)
            .map((e) => e.details.keycloakEventId as string),
        ),
      ),
  };
  return { cursors, state };
}

describe('a round of Keycloak event pulls over many realms', () => {
  const clock = manualClock(1_000_000);

  function pullOf(deps: Partial<KeycloakEventPullDeps> & Pick<KeycloakEventPullDeps, 'source'>) {
    return createKeycloakEventPull({
      purpose: 'audit',
      cursors: cursorsOf([]).cursors,
      realms: () => Promise.resolve([]),
      holder: 'test',
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
      ...deps,
    });
  }

  it(`pulls ${REALMS_AT_ONCE} realms at once, no more, each once, and counts each`, async () => {
    const realms = ['master', ...Array.from({ length: 3 * REALMS_AT_ONCE }, (_, i) => `org-${i}`)];
    const events = Object.fromEntries(realms.map((realm) => [realm, [login(`${realm}-1`, 10)]]));
    const told: string[] = [];
    const { cursors, state } = cursorsOf([]);
    const counted: string[] = [];
    await pullOf({
      purpose: 'auth',
      source: keycloakOf(events),
      cursors,
      seen: (realm, taken) => {
        told.push(...taken.user.map((e) => e.id));
        return Promise.resolve();
      },
      realms: () => Promise.resolve(realms),
      metrics: { keycloakEventPull: (outcome) => counted.push(outcome) },
    }).pullAll();
    expect(state.mostHeld).toBe(REALMS_AT_ONCE);
    expect(state.holding).toBe(0);
    expect([...state.released].sort()).toEqual([...realms].sort());
    expect(told.sort()).toEqual(realms.map((realm) => `${realm}-1`).sort());
    expect(counted).toEqual(realms.map(() => 'ok'));
  });

  it('leaves more than half the pool’s connections to the rest of the process', () => {
    // A slow database: each realm pulled at once may hold a connection for a statement's time,
    // beside the audit log's page reads and exports (up to half the pool), its writer, requests
    // and the readiness check.
    expect(REALMS_AT_ONCE).toBeLessThan(DATABASE_POOL_SIZE / 2);
  });

  it('takes no further realm once stopped, and lets the pulls in progress end', async () => {
    const realms = Array.from({ length: 3 * REALMS_AT_ONCE }, (_, i) => `org-${i}`);
    const events = Object.fromEntries(realms.map((realm) => [realm, [login(`${realm}-1`, 10)]]));
    const { cursors, state } = cursorsOf([]);
    let go: () => void = () => undefined;
    const stopped = new Promise<void>((resolve) => (go = resolve));
    // Every realm's events are read only once the round was stopped.
    const keycloak = keycloakOf(events, () => stopped);
    const started: string[] = [];
    const source: KeycloakEventSource = {
      ...keycloak,
      prepare: (realm) => {
        if (realm !== 'master') started.push(realm);
        return keycloak.prepare(realm);
      },
    };
    const stopping = new AbortController();
    const round = pullOf({
      source,
      cursors,
      writer: { offer: () => true, flush: () => Promise.resolve() },
      realms: () => Promise.resolve(realms),
    }).pullAll(stopping.signal);
    await expect.poll(() => state.holding).toBe(REALMS_AT_ONCE);
    stopping.abort();
    go();
    await round;
    expect(started).toEqual(realms.slice(0, REALMS_AT_ONCE));
    expect([...state.released].sort()).toEqual([...started].sort());
    expect(state.holding).toBe(0);
  });

  it('goes on with the other realms while one is slow, and counts a failed one', async () => {
    // org-slow's events are read only once every other realm was pulled: one after the other,
    // the round would never get to them.
    const realms = ['org-slow', 'org-failing', 'org-a', 'org-b'];
    const events = Object.fromEntries(realms.map((realm) => [realm, [login(`${realm}-1`, 10)]]));
    const { cursors, state } = cursorsOf([]);
    let othersDone: () => void = () => undefined;
    const others = new Promise<void>((resolve) => (othersDone = resolve));
    const source = keycloakOf(events, async (realm) => {
      if (realm === 'org-failing') throw new Error('Keycloak answered 500');
      if (realm === 'org-slow') await others;
    });
    const counted: string[] = [];
    const { logger, records } = loggerToRecords();
    const round = pullOf({
      source,
      cursors,
      writer: { offer: () => true, flush: () => Promise.resolve() },
      realms: () => Promise.resolve(realms),
      logger,
      metrics: { keycloakEventPull: (outcome) => counted.push(outcome) },
    }).pullAll();
    await expect.poll(() => state.released).toEqual(['org-a', 'org-b']);
    othersDone();
    await round;
    expect(state.released).toEqual(['org-a', 'org-b', 'org-slow']);
    expect(counted.sort()).toEqual(['failed', 'ok', 'ok', 'ok']);
    expect(records.filter((r) => r.level === 40).map((r) => [r.realm, r.msg])).toEqual([
      ['org-failing', 'keycloak events: pull failed; next time'],
    ]);
  });

  it('neither loses nor doubles a record when a realm’s write fails while another’s succeeds', async () => {
    const events = { 'org-p': [login('p1', 10)], 'org-q': [login('q1', 10)] };
    const log: AuditEvent[] = [];
    const { cursors } = cursorsOf(log);
    // As AuditWriter's: one spool, and a flush writes what was spooled when it was called.
    // org-p's flush waits (the database slow), org-q's fails (its connection reset), then
    // org-p's succeeds, having written what was spooled before it: org-p's record, not org-q's.
    const spool: AuditEvent[] = [];
    let flushes = 0;
    let pFlushing: () => void = () => undefined;
    const pFlushCalled = new Promise<void>((resolve) => (pFlushing = resolve));
    let writeP: () => void = () => undefined;
    const writer = {
      offer: (e: AuditEvent) => spool.push(e) > 0,
      flush: () => {
        const mark = spool.length;
        flushes++;
        if (flushes === 1) {
          pFlushing();
          return new Promise<void>((resolve) => {
            writeP = () => resolve(void log.push(...spool.splice(0, mark)));
          });
        }
        if (flushes === 2) return Promise.reject(new Error('connection reset'));
        log.push(...spool.splice(0, mark));
        return Promise.resolve();
      },
    };
    const pull = pullOf({
      // org-q's events are read once org-p's flush began.
      source: keycloakOf(events, (realm) => (realm === 'org-q' ? pFlushCalled : Promise.resolve())),
      cursors,
      writer,
      clock: manualClock(10 + SETTLE_MS),
    });
    const p = pull.pullRealm('org-p');
    await expect(pull.pullRealm('org-q')).rejects.toThrow('connection reset');
    writeP();
    expect(await p).toBe(1);
    expect(spool.map((e) => e.details.keycloakEventId)).toEqual(['q1']);
    // org-q's cursor did not move: its next pull reads q1 again, which waits in the spool.
    await pull.pullRealm('org-q');
    expect(log.map((e) => e.details.keycloakEventId)).toEqual(['p1', 'q1']);
  });
});
