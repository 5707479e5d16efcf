import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserCodeLogin, createBrowserClient } from '../helpers/browser-login.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, keycloakAdmin } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The re-check (REVOCATION_CHECK_SECONDS) introspects every Bearer token the gateway serves as
 * the gateway's own client, whichever client of the realm the token was issued to. Keycloak
 * answers `active: false` when the asking client is not in the token's `aud`: a browser client's
 * token (the authorization-code flow, as a single-page app's users hold) must still be served
 * past its re-checks while its session lives, and refused once the session ends in Keycloak.
 */
describe('the re-check of a token issued to a browser client of the realm', () => {
  const clock = aheadClock();
  const settings = () => ({
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}recheck-browser-${randomBytes(4).toString('hex')}:`,
    REVOCATION_CHECK_SECONDS: '1',
    // Not what this file tests (test/unit/auth/bearer/active-check.test.ts bounds the wait): on a
    // loaded machine Keycloak's answer may take over the 1 s default, and the request is served.
    REVOCATION_CHECK_WAIT_MS: '30000',
  });
  let replica: Replica;
  beforeAll(async () => {
    replica = await startReplica(18740, settings(), undefined, clock);
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  async function answer(base: string, path: string, token: string) {
    const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { message?: string };
    return { status: res.status, message: body.message };
  }

  it('is served past its re-checks while its session lives, refused once the session is ended in Keycloak', async () => {
    const org = await createOrganization(['ws']);
    const app = await createBrowserClient(org);
    const user = await createUser(org);
    const { access } = await browserCodeLogin(replica.url, user, app, new Map());
    const path = `/api/${org}/platform/workspaces`;

    // The first request waits for the token's first re-check, the one after the interval too.
    expect(await answer(replica.url, path, access)).toMatchObject({ status: 200 });
    clock.advance(1100);
    expect(await answer(replica.url, path, access)).toMatchObject({ status: 200 });

    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({
      realm: org,
      session: String(claimsOf(access).sid),
      isOffline: false,
    });
    clock.advance(1100);
    expect(await answer(replica.url, path, access)).toEqual({
      status: 401,
      message: 'Token is no longer active.',
    });
  });

  it("is served in a realm made before the fix: the start-up alignment puts the gateway in its clients' tokens", async () => {
    const org = await createOrganization(['ws']);
    const admin = await keycloakAdmin();
    // A realm made before: its `basic` scope without the gateway's audience mapper.
    const basic = (await admin.clientScopes.find({ realm: org })).find((s) => s.name === 'basic')!;
    for (const mapper of basic.protocolMappers ?? []) {
      if (mapper.protocolMapper !== 'oidc-audience-mapper') continue;
      await admin.clientScopes.delProtocolMapper({
        realm: org,
        id: basic.id!,
        mapperId: mapper.id!,
      });
    }
    // ... and, as a realm made before it, not recorded as aligned under the current steps (a
    // replica of another suite may have recorded it since it was made: realm-alignment.ts).
    await testDb()('realm_alignments').where({ realm: org }).delete();
    const app = await createBrowserClient(org);
    const user = await createUser(org);
    const path = `/api/${org}/platform/workspaces`;
    const before = await browserCodeLogin(replica.url, user, app, new Map());
    expect([claimsOf(before.access).aud].flat()).not.toContain('realmgate-gateway');

    const started = await startReplica(18742, settings(), undefined, clock);
    try {
      // The replica's alignment walks every realm of the shared Keycloak: wait for this one.
      const mappersOfBasic = async () =>
        (await admin.clientScopes.find({ realm: org }))
          .find((scope) => scope.name === 'basic')!
          .protocolMappers!.map((mapper) => mapper.protocolMapper);
      await expect.poll(mappersOfBasic, EVENTUALLY).toContain('oidc-audience-mapper');
      const { access } = await browserCodeLogin(started.url, user, app, new Map());
      expect(await answer(started.url, path, access)).toMatchObject({ status: 200 });
    } finally {
      await started.gateway.close();
    }
  });
});
