import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { KeycloakAdmin } from '../../../src/keycloak/admin-client.ts';
import { createRealmAlignment } from '../../../src/platform/realm-alignment.ts';
import { pointRealmAtGateway } from '../../../src/platform/realm-admin/backchannel-logout.ts';

const URL = 'http://gateway:8001/backchannel-logout';
const WANTED = {
  'backchannel.logout.url': URL,
  'backchannel.logout.session.required': 'true',
};

interface FakeClient {
  id: string;
  clientId: string;
  attributes?: Record<string, string>;
}

/**
 * Keycloak's admin API as far as the alignment uses it: realms, their clients and their `basic`
 * client scope's mappers, in memory.
 */
function fakeKeycloak(realms: Record<string, FakeClient[]>, failing = new Set<string>()) {
  const updates: { realm: string; id: string; attributes: unknown }[] = [];
  const mappers: Record<string, { name?: string }[]> = {};
  const admin = {
    clientScopes: {
      find: ({ realm }: { realm: string }) =>
        Promise.resolve([
          { id: `${realm}-profile`, name: 'profile', protocolMappers: [] },
          { id: `${realm}-basic`, name: 'basic', protocolMappers: [...(mappers[realm] ?? [])] },
        ]),
      addProtocolMapper: ({ realm }: { realm: string }, mapper: { name?: string }) => {
        (mappers[realm] ??= []).push(mapper);
        return Promise.resolve();
      },
    },
    realms: { find: () => Promise.resolve(Object.keys(realms).map((realm) => ({ realm }))) },
    clients: {
      find: ({ realm }: { realm: string }) =>
        failing.has(realm)
          ? Promise.reject(new Error('403 Forbidden'))
          : Promise.resolve(structuredClone(realms[realm]!)),
      update: ({ realm, id }: { realm: string; id: string }, rep: FakeClient) => {
        updates.push({ realm, id, attributes: rep.attributes });
        realms[realm]!.find((client) => client.id === id)!.attributes = rep.attributes;
        return Promise.resolve();
      },
    },
  } as unknown as KeycloakAdmin;
  return {
    admin,
    updates,
    mappers,
    session: { run: <T>(work: (a: KeycloakAdmin) => Promise<T>) => work(admin) },
  };
}

const organization = (org: string, attributes?: Record<string, string>): FakeClient[] => [
  {
    id: `${org}-1`,
    clientId: `_${org}-api`,
    attributes: { 'access.token.lifespan': '86400', ...attributes },
  },
  { id: `${org}-2`, clientId: `${org}-workspaces` },
  { id: `${org}-3`, clientId: 'realmgate-gateway', attributes },
  { id: `${org}-4`, clientId: 'app-a' },
];

afterEach(() => {
  vi.useRealTimers();
});

describe("pointing a realm's clients at the back-channel logout URL", () => {
  it('sets both attributes on the API client and the gateway client only, keeping the others', async () => {
    const { admin, updates } = fakeKeycloak({ acme: organization('acme') });
    expect(await pointRealmAtGateway(admin, 'acme', URL)).toBe(true);
    expect(updates).toEqual([
      { realm: 'acme', id: 'acme-1', attributes: { 'access.token.lifespan': '86400', ...WANTED } },
      { realm: 'acme', id: 'acme-3', attributes: WANTED },
    ]);
  });

  it('writes nothing when they are set already (a second replica starting)', async () => {
    const { admin, updates } = fakeKeycloak({ acme: organization('acme', WANTED) });
    expect(await pointRealmAtGateway(admin, 'acme', URL)).toBe(false);
    expect(updates).toEqual([]);
  });

  it("takes master's `_platform-api`", async () => {
    const { admin, updates } = fakeKeycloak({
      master: [
        { id: 'm1', clientId: '_platform-api' },
        { id: 'm2', clientId: 'admin-cli' },
      ],
    });
    await pointRealmAtGateway(admin, 'master', URL);
    expect(updates.map((update) => update.id)).toEqual(['m1']);
  });
});

describe('the alignment at start', () => {
  it('names the realms it could not set in readiness, degraded, and tries them again later', async () => {
    vi.useFakeTimers();
    const failing = new Set(['beta']);
    const keycloak = fakeKeycloak(
      { alpha: organization('alpha'), beta: organization('beta') },
      failing,
    );
    const alignment = createRealmAlignment({
      adminSession: keycloak.session,
      url: URL,
      logger: pino({ level: 'silent' }),
      retryMs: 60_000,
    });
    expect(await alignment.report()).toEqual({
      status: 'up',
      details: { url: URL, pending: true },
    });
    alignment.start();
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({
        status: 'degraded',
        details: { url: URL, realmsNotSet: ['beta'], realmsNotSetCount: 1 },
      }),
    );
    failing.delete('beta');
    await vi.advanceTimersByTimeAsync(60_000);
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({ status: 'up', details: { url: URL } }),
    );
    expect(keycloak.updates.map((update) => update.id).sort()).toEqual([
      'alpha-1',
      'alpha-3',
      'beta-1',
      'beta-3',
    ]);
    // The gateway's audience mapper in each realm's `basic` scope, once.
    expect(keycloak.mappers).toEqual({
      alpha: [expect.objectContaining({ name: 'audience realmgate-gateway' })],
      beta: [expect.objectContaining({ name: 'audience realmgate-gateway' })],
    });
    alignment.close();
  });

  it("puts the gateway in a realm's audience even when its back-channel URL could not be set", async () => {
    const keycloak = fakeKeycloak(
      { alpha: organization('alpha'), beta: organization('beta') },
      new Set(['beta']),
    );
    const alignment = createRealmAlignment({
      adminSession: keycloak.session,
      url: URL,
      logger: pino({ level: 'silent' }),
    });
    alignment.start();
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({
        status: 'degraded',
        details: { url: URL, realmsNotSet: ['beta'], realmsNotSetCount: 1 },
      }),
    );
    expect(keycloak.mappers).toEqual({
      alpha: [expect.objectContaining({ name: 'audience realmgate-gateway' })],
      beta: [expect.objectContaining({ name: 'audience realmgate-gateway' })],
    });
    alignment.close();
  });

  it("leaves out a realm deleted while the pass ran, and counts a proxy's 404 as not set", async () => {
    // Keycloak's own answer for a realm that no longer exists, and a proxy's while Keycloak is
    // away behind it: the same status, told apart by the body.
    const answered = (responseData: unknown) =>
      Object.assign(new Error('Request failed with status 404'), {
        response: { status: 404 },
        responseData,
      });
    const keycloak = fakeKeycloak({
      alpha: organization('alpha'),
      gone: organization('gone'),
      behindProxy: organization('behindProxy'),
    });
    const admin = keycloak.admin as unknown as {
      clients: {
        find: (query: { realm: string }) => Promise<unknown>;
        update: (query: { realm: string }, rep: unknown) => Promise<unknown>;
      };
      realms: { findOne?: (query: { realm: string }) => Promise<unknown> };
    };
    const { find, update } = admin.clients;
    admin.clients.find = (query) =>
      query.realm === 'behindProxy'
        ? Promise.reject(answered('<html>Not Found</html>'))
        : find(query);
    // Deleted after its clients were read.
    admin.clients.update = (query, rep) =>
      query.realm === 'gone'
        ? Promise.reject(answered({ error: 'Realm not found.' }))
        : update(query, rep);
    admin.realms.findOne = ({ realm }) =>
      realm === 'gone'
        ? Promise.reject(answered({ error: 'Realm not found.' }))
        : Promise.resolve({ realm });
    const alignment = createRealmAlignment({
      adminSession: keycloak.session,
      url: URL,
      logger: pino({ level: 'silent' }),
    });
    alignment.start();
    await vi.waitFor(async () =>
      expect(await alignment.report()).toEqual({
        status: 'degraded',
        details: { url: URL, realmsNotSet: ['behindProxy'], realmsNotSetCount: 1 },
      }),
    );
    alignment.close();
  });

  it('is degraded, not fatal, while Keycloak does not list its realms', async () => {
    const alignment = createRealmAlignment({
      adminSession: { run: () => Promise.reject(new Error('unreachable')) },
      url: URL,
      logger: pino({ level: 'silent' }),
    });
    alignment.start();
    await vi.waitFor(async () => expect((await alignment.report()).status).toBe('degraded'));
    alignment.close();
  });
});
