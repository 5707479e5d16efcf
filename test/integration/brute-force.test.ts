import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { shippedBruteForceSettings } from '../../src/keycloak/brute-force.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  createOrganizationRealm,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

const ENDPOINT = '/api/platform/brute-force-detection';

/** Password grant through the gateway's token endpoint, as a password guesser would send it. */
function grant(user: TestUser, password = user.password) {
  const body = passwordGrantBody({ ...user, password });
  return postToken(`${testEnv().publicUrl}/auth`, user.realm, body);
}

async function lockStateOf(user: TestUser): Promise<Record<string, unknown> | undefined> {
  const admin = await keycloakAdmin();
  return admin.attackDetection.findOne({ realm: user.realm, id: await userIdOf(user) });
}

async function clearLock(user: TestUser): Promise<void> {
  const admin = await keycloakAdmin();
  await admin.attackDetection.del({ realm: user.realm, id: await userIdOf(user) });
}

describe('brute-force detection', () => {
  let administrator: TestUser;

  beforeAll(async () => {
    administrator = await createUser('master');
  });

  it('is on, with the shipped settings, in master and in a fresh organization realm', async () => {
    const shipped = await shippedBruteForceSettings();
    expect(shipped).toEqual({
      bruteForceProtected: true,
      permanentLockout: false,
      failureFactor: 10,
      waitIncrementSeconds: 60,
      maxFailureWaitSeconds: 900,
      maxDeltaTimeSeconds: 43200,
      quickLoginCheckMilliSeconds: 1000,
      minimumQuickLoginWaitSeconds: 60,
    });
    const admin = await keycloakAdmin();
    const org = await createOrganizationRealm();
    expect(await admin.realms.findOne({ realm: org })).toMatchObject(shipped);
    expect(await admin.realms.findOne({ realm: 'master' })).toMatchObject(shipped);
    // README describes this strategy (a minute more per further 10 failures): Keycloak's default.
    expect(await admin.realms.findOne({ realm: org })).toMatchObject({
      bruteForceStrategy: 'MULTIPLE',
    });
  });

  it('lets concurrent good logins of one user all through (allow-concurrent-requests)', async () => {
    const user = await createUser(await createOrganizationRealm());
    const answers = await Promise.all(Array.from({ length: 8 }, () => grant(user)));
    expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 8 }, () => 200));
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 0 });
  });

  it('forgets failed logins at a successful one', async () => {
    const user = await createUser(await createOrganizationRealm());
    expect((await grant(user, 'wrong-password')).status).toBe(400);
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 1 });
    expect((await grant(user)).status).toBe(200);
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 0 });
  });

  it(`POST ${ENDPOINT} turns it on where it is off, and a repeat changes nothing`, async () => {
    const admin = await keycloakAdmin();
    const org = await createOrganizationRealm();
    await admin.realms.update({ realm: org }, { bruteForceProtected: false, failureFactor: 30 });
    const existing = (await admin.realms.find()).map((realm) => realm.realm);

    const first = await callApi(ENDPOINT, basicAuth(administrator), { method: 'POST' });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ result: '000-00000' });
    const data = first.body.data as { realm: string; changed: boolean }[];
    for (const entry of data) expect(Object.keys(entry).sort()).toEqual(['changed', 'realm']);
    expect(data.map((entry) => entry.realm)).toEqual(expect.arrayContaining(existing));
    expect(data).toContainEqual({ realm: org, changed: true });
    expect(data).toContainEqual({ realm: 'master', changed: false });
    expect(await admin.realms.findOne({ realm: org })).toMatchObject(
      await shippedBruteForceSettings(),
    );

    const again = await callApi(ENDPOINT, basicAuth(administrator), { method: 'POST' });
    expect(again.status).toBe(200);
    expect(again.body.data).toContainEqual({ realm: org, changed: false });
  });

  it(`refuses POST ${ENDPOINT} to organization users with 401-00002`, async () => {
    const org = await createOrganizationRealm();
    const user = await createUser(org);
    const asOrgUser = await callApi(ENDPOINT, basicAuth(user), { method: 'POST' });
    expect(asOrgUser).toMatchObject({ status: 401, body: { result: '401-00002' } });
  });

  it('locks a user after two wrong passwords within a second; then the right one fails too', async () => {
    const user = await createUser(await createOrganizationRealm());
    expect((await grant(user, 'wrong-password-1')).status).toBe(400);
    expect((await grant(user, 'wrong-password-2')).status).toBe(400);
    const refused = await grant(user);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ error: 'invalid_grant' });
    expect(await lockStateOf(user)).toMatchObject({ disabled: true, numFailures: 2 });
    await clearLock(user);
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 0 });
    expect((await grant(user)).status).toBe(200);
  });

  it('locks a user at the tenth wrong password, however slowly they come', async () => {
    const user = await createUser(await createOrganizationRealm());
    for (let failure = 1; failure <= 9; failure++) {
      expect((await grant(user, `wrong-password-${failure}`)).status).toBe(400);
      // Slower than the quick-login check, so that only the failure count can lock.
      await sleep(1100);
    }
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 9 });
    expect((await grant(user, 'wrong-password-10')).status).toBe(400);
    expect(await lockStateOf(user)).toMatchObject({ disabled: true, numFailures: 10 });
    expect((await grant(user)).status).toBe(400);
    await clearLock(user);
    expect((await grant(user)).status).toBe(200);
  }, 30_000);
});
