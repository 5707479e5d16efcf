import type { Knex } from 'knex';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { KeycloakAdmin } from '../../../src/keycloak/admin-client.ts';
import { createRealmAlignment, STEPS_VERSION } from '../../../src/platform/realm-alignment.ts';
import {
  createRealmAlignmentsRepo,
  type RealmAlignmentsRepo,
} from '../../../src/platform/realm-alignments.repo.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';
import { loggerToRecords } from '../../helpers/log-lines.ts';

const URL = 'http://gateway:8001/backchannel-logout';

interface FakeRealm {
  id: string;
  clients: { id: string; clientId: string; attributes?: Record<string, string> }[];
  mappers: { name?: string }[];
}

/**
 * Keycloak's admin API as the alignment uses it, counting each per-realm read: the realms'
 * brief listing (ids and names), each realm's clients and client scopes.
 */
function fakeKeycloak() {
  const realms = new Map<string, FakeRealm>();
  const reads: string[] = [];
  const listings: unknown[] = [];
  const failing = new Set<string>();
  const admin = {
    realms: {
      find: (query: unknown) => {
        listings.push(query);
        return Promise.resolve([...realms].map(([realm, { id }]) => ({ id, realm })));
      },
    },
    clients: {
      find: ({ realm }: { realm: string }) => {
        reads.push(`${realm} clients`);
        if (failing.has(realm)) return Promise.reject(new Error('403 Forbidden'));
        return Promise.resolve(structuredClone(realms.get(realm)!.clients));
      },
      update: ({ realm, id }: { realm: string; id: string }, rep: FakeRealm['clients'][0]) => {
        realms.get(realm)!.clients.find((client) => client.id === id)!.attributes = rep.attributes;
        return Promise.resolve();
      },
    },
    clientScopes: {
      find: ({ realm }: { realm: string }) => {
        reads.push(`${realm} scopes`);
        return Promise.resolve([
          { id: `${realm}-basic`, name: 'basic', protocolMappers: [...realms.get(realm)!.mappers] },
        ]);
      },
      addProtocolMapper: ({ realm }: { realm: string }, mapper: { name?: string }) => {
        realms.get(realm)!.mappers.push(mapper);
        return Promise.resolve();
      },
    },
  } as unknown as KeycloakAdmin;
  /** Makes (or makes again, under a new id) an organization's realm with nothing aligned. */
  const make = (realm: string, id = `${realm}-${Math.random()}`) =>
    realms.set(realm, {
      id,
      clients: [{ id: `${realm}-1`, clientId: `_${realm}-api` }],
      mappers: [],
    });
  return {
    realms,
    reads,
    listings,
    failing,
    make,
    session: { run: <T>(work: (a: KeycloakAdmin) => Promise<T>) => work(admin) },
  };
}

let db: Knex;
let close: () => Promise<void>;
let records: RealmAlignmentsRepo;
beforeAll(async () => {
  ({ db, close } = await openEmbeddedDatabase('realm-alignments'));
  records = createRealmAlignmentsRepo(db);
}, 120_000);
afterAll(() => close());
beforeEach(() => db('realm_alignments').delete());

/** Starts a replica's alignment against `keycloak` and waits until its pass is over. */
async function startAndSettle(keycloak: ReturnType<typeof fakeKeycloak>, url = URL) {
  const alignment = createRealmAlignment({
    adminSession: keycloak.session,
    url,
    logger: pino({ level: 'silent' }),
    records,
  });
  alignment.start();
  await vi.waitFor(async () =>
    expect((await alignment.report()).details).not.toHaveProperty('pending'),
  );
  alignment.close();
  return alignment;
}

describe('the alignment remembers which realms it found aligned', () => {
  it('a second start reads no realm when every realm is recorded for its URL, and lists them in brief', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta', 'gamma']) keycloak.make(realm);
    await startAndSettle(keycloak);
    expect(keycloak.reads.sort()).toEqual([
      'alpha clients',
      'alpha scopes',
      'beta clients',
      'beta scopes',
      'gamma clients',
      'gamma scopes',
    ]);
    keycloak.reads.length = 0;
    const second = await startAndSettle(keycloak);
    expect(keycloak.reads).toEqual([]);
    expect(keycloak.listings).toEqual([
      { briefRepresentation: true },
      { briefRepresentation: true },
    ]);
    expect(await second.report()).toEqual({ status: 'up', details: { url: URL } });
  });

  it('checks only the realms not recorded: one made since, one made again under its name', async () => {
    const keycloak = fakeKeycloak();
    keycloak.make('alpha');
    keycloak.make('beta');
    await startAndSettle(keycloak);
    keycloak.reads.length = 0;
    keycloak.make('delta');
    keycloak.make('beta', 'beta-made-again');
    await startAndSettle(keycloak);
    expect(keycloak.reads.sort()).toEqual([
      'beta clients',
      'beta scopes',
      'delta clients',
      'delta scopes',
    ]);
    expect(keycloak.realms.get('beta')!.mappers).toHaveLength(1);
    expect(keycloak.realms.get('beta')!.clients[0]!.attributes).toMatchObject({
      'backchannel.logout.url': URL,
    });
  });

  it('a new URL aligns every realm once for all replicas', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta']) keycloak.make(realm);
    await startAndSettle(keycloak);
    keycloak.reads.length = 0;
    const moved = 'http://gateway-2:8001/backchannel-logout';
    await startAndSettle(keycloak, moved);
    expect(keycloak.reads).toHaveLength(4);
    for (const realm of ['alpha', 'beta']) {
      expect(keycloak.realms.get(realm)!.clients[0]!.attributes).toMatchObject({
        'backchannel.logout.url': moved,
      });
    }
    keycloak.reads.length = 0;
    await startAndSettle(keycloak, moved);
    expect(keycloak.reads).toEqual([]);
  });

  it('checks again a realm recorded under older steps, or longer ago than a day (drift by hand)', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta', 'gamma']) keycloak.make(realm);
    await startAndSettle(keycloak);
    keycloak.reads.length = 0;
    const { id: alpha } = keycloak.realms.get('alpha')!;
    const { id: beta } = keycloak.realms.get('beta')!;
    await db('realm_alignments')
      .where({ realm_id: alpha })
      .update({ steps_version: STEPS_VERSION - 1 });
    await db('realm_alignments')
      .where({ realm_id: beta })
      .update({ aligned_at: db.raw("now() - interval '25 hours'") });
    // An administrator took the mapper off by hand: repaired at beta's check.
    keycloak.realms.get('beta')!.mappers.length = 0;
    await startAndSettle(keycloak);
    expect(keycloak.reads.sort()).toEqual([
      'alpha clients',
      'alpha scopes',
      'beta clients',
      'beta scopes',
    ]);
    expect(keycloak.realms.get('beta')!.mappers).toHaveLength(1);
    keycloak.reads.length = 0;
    await startAndSettle(keycloak);
    expect(keycloak.reads).toEqual([]);
  });

  it('records no realm a step failed on: readiness names it, and the next start checks it again', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta']) keycloak.make(realm);
    keycloak.failing.add('beta');
    const first = await startAndSettle(keycloak);
    expect(await first.report()).toEqual({
      status: 'degraded',
      details: { url: URL, realmsNotSet: ['beta'], realmsNotSetCount: 1 },
    });
    keycloak.failing.delete('beta');
    keycloak.reads.length = 0;
    const second = await startAndSettle(keycloak);
    expect(keycloak.reads.sort()).toEqual(['beta clients', 'beta scopes']);
    expect(await second.report()).toEqual({ status: 'up', details: { url: URL } });
  });

  it('forgets the records of realms deleted from Keycloak an hour ago', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta']) keycloak.make(realm);
    await startAndSettle(keycloak);
    const { id: beta } = keycloak.realms.get('beta')!;
    keycloak.realms.delete('beta');
    await startAndSettle(keycloak);
    expect(await db('realm_alignments').pluck('realm')).toEqual(
      expect.arrayContaining(['alpha', 'beta']),
    );
    await db('realm_alignments')
      .where({ realm_id: beta })
      .update({ aligned_at: db.raw("now() - interval '2 hours'") });
    await startAndSettle(keycloak);
    expect(await db('realm_alignments').pluck('realm')).toEqual(['alpha']);
  });

  it('checks every realm while its records cannot be read', async () => {
    const keycloak = fakeKeycloak();
    for (const realm of ['alpha', 'beta']) keycloak.make(realm);
    await startAndSettle(keycloak);
    keycloak.reads.length = 0;
    const broken = new Error('database down');
    const alignment = createRealmAlignment({
      adminSession: keycloak.session,
      url: URL,
      logger: pino({ level: 'silent' }),
      records: {
        freshIds: () => Promise.reject(broken),
        isFresh: () => Promise.reject(broken),
        record: () => Promise.reject(broken),
        forgetUnlisted: () => Promise.reject(broken),
      },
    });
    alignment.start();
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({ status: 'up', details: { url: URL } }),
    );
    alignment.close();
    expect(keycloak.reads).toHaveLength(4);
  });

  /**
   * Runs a pass over five unrecorded realms with the records wrapped so that `fails` says which
   * call fails (the database gone mid-pass); how often each was called, and the warnings.
   */
  async function passWithRecordsFailing(fails: { isFreshAfter?: number; recordAfter?: number }) {
    const keycloak = fakeKeycloak();
    const names = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'];
    for (const realm of names) keycloak.make(realm);
    const broken = new Error('database gone');
    const calls = { isFresh: 0, record: 0 };
    const { logger, records: lines } = loggerToRecords();
    const alignment = createRealmAlignment({
      adminSession: keycloak.session,
      url: URL,
      logger,
      records: {
        freshIds: (...args) => records.freshIds(...args),
        forgetUnlisted: (...args) => records.forgetUnlisted(...args),
        isFresh: (...args) =>
          ++calls.isFresh > (fails.isFreshAfter ?? Infinity)
            ? Promise.reject(broken)
            : records.isFresh(...args),
        record: (...args) =>
          ++calls.record > (fails.recordAfter ?? Infinity)
            ? Promise.reject(broken)
            : records.record(...args),
      },
    });
    alignment.start();
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({ status: 'up', details: { url: URL } }),
    );
    alignment.close();
    for (const realm of names) {
      expect(keycloak.realms.get(realm)!.clients[0]!.attributes).toMatchObject({
        'backchannel.logout.url': URL,
      });
    }
    expect(keycloak.reads).toHaveLength(2 * names.length);
    const warnings = lines.filter(({ msg }) => String(msg).includes('its records failed'));
    return { calls, warnings, recorded: await db('realm_alignments').pluck('realm') };
  }

  it('a look-up of the records that fails mid-pass leaves the rest of the pass without them', async () => {
    const { calls, warnings, recorded } = await passWithRecordsFailing({ isFreshAfter: 1 });
    // The first realm looked up and recorded; the second's look-up failed: none asked again.
    expect(calls).toEqual({ isFresh: 2, record: 1 });
    expect(recorded).toHaveLength(1);
    expect(warnings).toHaveLength(1);
  });

  it('a record that fails mid-pass leaves the rest of the pass without the records', async () => {
    const { calls, warnings, recorded } = await passWithRecordsFailing({ recordAfter: 1 });
    // The second realm's record failed: no realm after it looked up or recorded.
    expect(calls).toEqual({ isFresh: 2, record: 2 });
    expect(recorded).toHaveLength(1);
    expect(warnings).toHaveLength(1);
  });
});
