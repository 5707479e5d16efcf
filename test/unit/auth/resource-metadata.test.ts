import express from 'express';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  resourceMetadataRouter,
  resourceMetadataUrlOf,
} from '../../../src/auth/resource-metadata.ts';
import { createGoneRealms, REALM_GONE_MEMORY_MS } from '../../../src/auth/gone-realms.ts';
import { createErrorHandler } from '../../../src/envelope/error-handler.ts';
import { AppError } from '../../../src/envelope/errors.ts';
import type { OrganizationState } from '../../../src/tenancy/organization-state.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const BASE = 'https://gw.example';
const clock = manualClock();
const organizations: Record<string, OrganizationState> = { acme: 'enabled', gone: 'disabled' };
/** The realms' DPoP switches as Keycloak would answer; a realm missing here: Keycloak down. */
let switches: Record<string, boolean>;
/** Realms Keycloak answers it does not have (deleted there while the organization stays). */
const deletedInKeycloak = new Set<string>();
/** The memory of gone realms the other paths (Basic, Bearer, the re-check) share. */
const gone = createGoneRealms(clock);
let asked: string[];
let server: Server;
let url: string;

beforeAll(async () => {
  const app = express();
  app.use(
    resourceMetadataRouter({
      htuBase: BASE,
      algorithms: ['ES256', 'PS256'],
      organizations: { stateOf: (id) => Promise.resolve(organizations[id] ?? 'absent') },
      clientAddressOf: (req) => req.socket.remoteAddress ?? '',
      dpopRequired: (realm) => {
        asked.push(realm);
        if (deletedInKeycloak.has(realm))
          return Promise.reject(new AppError('organizationNotFound'));
        return realm in switches
          ? Promise.resolve(switches[realm]!)
          : Promise.reject(new Error('Keycloak down'));
      },
      gone,
      clock,
    }),
  );
  app.use(createErrorHandler(pino({ enabled: false })));
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => {
  switches = { master: false, acme: true };
  asked = [];
  clock.advance(10 * 60_000);
});

async function get(path: string) {
  const res = await fetch(`${url}/.well-known/oauth-protected-resource${path}`);
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as Record<string, unknown>,
  };
}

describe('protected-resource metadata (RFC 9728)', () => {
  it("describes an organization's API: its resource, its realm, the algorithms and its switch", async () => {
    const answer = await get('/api/acme');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      resource: `${BASE}/api/acme`,
      authorization_servers: [`${BASE}/auth/realms/acme`],
      dpop_signing_alg_values_supported: ['ES256', 'PS256'],
      dpop_bound_access_tokens_required: true,
      bearer_methods_supported: ['header'],
    });
    expect(answer.headers.get('cache-control')).toBe('public, max-age=60');
    expect(resourceMetadataUrlOf(BASE, 'acme')).toBe(
      `${BASE}/.well-known/oauth-protected-resource/api/acme`,
    );
  });

  it('describes the platform API and the gateway root with realm master', async () => {
    const platform = await get('/api/platform');
    expect(platform.body).toMatchObject({
      resource: `${BASE}/api/platform`,
      authorization_servers: [`${BASE}/auth/realms/master`],
      dpop_bound_access_tokens_required: false,
    });
    expect((await get('')).body).toMatchObject({
      resource: BASE,
      authorization_servers: [`${BASE}/auth/realms/master`],
    });
    expect(resourceMetadataUrlOf(BASE, 'master')).toBe(
      `${BASE}/.well-known/oauth-protected-resource/api/platform`,
    );
  });

  it('answers an unknown or disabled organization as its API does, without asking Keycloak', async () => {
    expect(await get('/api/nobody')).toMatchObject({ status: 404, body: { result: '404-00001' } });
    expect(await get('/api/NO_SUCH')).toMatchObject({ status: 404, body: { result: '404-00001' } });
    expect(await get('/api/gone')).toMatchObject({ status: 403, body: { result: '403-23001' } });
    expect(asked).toEqual([]);
  });

  it('asks Keycloak for a switch at most once a minute, and keeps the last answer through an outage', async () => {
    await Promise.all([get('/api/acme'), get('/api/acme'), get('/api/acme')]);
    expect(asked).toEqual(['acme']);
    clock.advance(59_000);
    switches.acme = false;
    expect((await get('/api/acme')).body.dpop_bound_access_tokens_required).toBe(true);
    clock.advance(1_000);
    expect((await get('/api/acme')).body.dpop_bound_access_tokens_required).toBe(false);
    expect(asked).toEqual(['acme', 'acme']);

    clock.advance(60_000);
    delete switches.acme;
    const outage = await get('/api/acme');
    expect(outage).toMatchObject({
      status: 200,
      body: { dpop_bound_access_tokens_required: false },
    });
  });

  it('answers a realm gone in Keycloak from the memory every path shares, its switch fresh or not', async () => {
    organizations.deleted = 'enabled';
    switches.deleted = true;
    expect((await get('/api/deleted')).status).toBe(200);
    // A Basic login or a key-set fetch heard Keycloak say it no longer has the realm.
    gone.sawGone('deleted');
    expect(await get('/api/deleted')).toMatchObject({ status: 404, body: { result: '404-00001' } });
    expect(asked).toEqual(['deleted']);

    // Heard here first: said once to Keycloak, then answered from memory, and told the others.
    organizations.orphan = 'enabled';
    deletedInKeycloak.add('orphan');
    for (let i = 0; i < 3; i++) {
      expect(await get('/api/orphan')).toMatchObject({
        status: 404,
        body: { result: '404-00001' },
      });
    }
    expect(asked.filter((realm) => realm === 'orphan')).toEqual(['orphan']);
    expect(gone.isGone('orphan')).toBe(true);

    // Created again under the name: described once the memory has passed.
    deletedInKeycloak.delete('orphan');
    switches.orphan = false;
    clock.advance(REALM_GONE_MEMORY_MS);
    expect(await get('/api/orphan')).toMatchObject({
      status: 200,
      body: { dpop_bound_access_tokens_required: false },
    });
  });

  it('answers 503 for a switch never read while Keycloak does not answer', async () => {
    organizations.fresh = 'enabled';
    const answer = await get('/api/fresh');
    expect(answer).toMatchObject({ status: 503, body: { result: '503-11001' } });
  });
});
