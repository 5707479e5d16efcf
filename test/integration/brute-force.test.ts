import { beforeAll, describe, expect, it, vi } from 'vitest';
import { shippedBruteForceSettings } from '../../src/platform/realm-admin/brute-force.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  claimsOf,
  createOrganizationRealm,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { expectDocumentedAnswer } from '../helpers/documented-answer.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { testEnv } from '../helpers/test-env.ts';

const ENDPOINT = '/api/platform/brute-force-detection';

/**
 * Password grant straight to Keycloak: these tests show Keycloak's own lockout, the backstop
 * behind the gateway's login throttle (which would refuse most of these guesses itself).
 */
function grant(user: TestUser, password = user.password) {
  const body = passwordGrantBody({ ...user, password });
  return postToken(testEnv().keycloakUrl, user.realm, body);
}

async function lockStateOf(user: TestUser): Promise<Record<string, unknown> | undefined> {
  const admin = await keycloakAdmin();
  return admin.attackDetection.findOne({ realm: user.realm, id: await userIdOf(user) });
}

/**
 * Keycloak's own time, to the second: the `iat` of a token it issues `probe` (another user, as
 * a login of the user watched would clear that user's failures).
 */
async function keycloakSecondsNow(probe: TestUser): Promise<number> {
  const answer = await grant(probe);
  expect(answer.status).toBe(200);
  return claimsOf(answer.json.access_token).iat as number;
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
      failureFactor: 30,
      waitIncrementSeconds: 60,
      maxFailureWaitSeconds: 900,
      maxDeltaTimeSeconds: 15,
      quickLoginCheckMilliSeconds: 0,
      minimumQuickLoginWaitSeconds: 60,
    });
    const admin = await keycloakAdmin();
    const org = await createOrganizationRealm();
    expect(await admin.realms.findOne({ realm: org })).toMatchObject(shipped);
    expect(await admin.realms.findOne({ realm: 'master' })).toMatchObject(shipped);
    // README describes this strategy (a lock at each 30th failure): Keycloak's default.
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
    expectDocumentedAnswer('protectRealms', first.body);
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

  it('brings a realm still on the settings shipped earlier up to date', async () => {
    const admin = await keycloakAdmin();
    const org = await createOrganizationRealm();
    await admin.realms.update(
      { realm: org },
      { failureFactor: 10, maxDeltaTimeSeconds: 43200, quickLoginCheckMilliSeconds: 1000 },
    );
    const tuned = await createOrganizationRealm();
    await admin.realms.update({ realm: tuned }, { failureFactor: 12 });

    const answer = await callApi(ENDPOINT, basicAuth(administrator), { method: 'POST' });
    expect(answer.body.data).toContainEqual({ realm: org, changed: true });
    expect(answer.body.data).toContainEqual({ realm: tuned, changed: false });
    expect(await admin.realms.findOne({ realm: org })).toMatchObject(
      await shippedBruteForceSettings(),
    );
    expect(await admin.realms.findOne({ realm: tuned })).toMatchObject({ failureFactor: 12 });
  });

  it('does not lock for wrong passwords in quick succession: the quick-login check is off', async () => {
    const user = await createUser(await createOrganizationRealm());
    for (let failure = 1; failure <= 5; failure++) {
      expect((await grant(user, `wrong-password-${failure}`)).status).toBe(400);
    }
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 5 });
    expect((await grant(user)).status).toBe(200);
  });

  it('locks a user at the 30th wrong password in a row; then the right one fails too', async () => {
    const user = await createUser(await createOrganizationRealm());
    for (let failure = 1; failure <= 29; failure++) {
      expect((await grant(user, `wrong-password-${failure}`)).status).toBe(400);
    }
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 29 });
    expect((await grant(user, 'wrong-password-30')).status).toBe(400);
    expect(await lockStateOf(user)).toMatchObject({ disabled: true, numFailures: 30 });
    const refused = await grant(user);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ error: 'invalid_grant' });
    await clearLock(user);
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 0 });
    expect((await grant(user)).status).toBe(200);
  });

  it('starts counting again after the failure reset time without a failure', async () => {
    // The realm's reset time made short (shipped: 15 s, the first test): the test waits for
    // Keycloak's clock to pass it, which no test can move.
    const resetSeconds = 3;
    const realm = await createOrganizationRealm();
    const admin = await keycloakAdmin();
    const [user, probe] = [await createUser(realm), await createUser(realm)];
    for (let failure = 1; failure <= 3; failure++) {
      expect((await grant(user, `wrong-password-${failure}`)).status).toBe(400);
    }
    const state = await lockStateOf(user);
    expect(state).toMatchObject({ numFailures: 3 });
    // Made short only now: on a loaded machine two of the failures above may be further apart
    // than 3 s, and Keycloak would have begun counting again between them.
    await admin.realms.update({ realm }, { maxDeltaTimeSeconds: resetSeconds });
    // Nothing shows the reset before the next failure: wait until Keycloak's time is past it.
    const resetAt = Math.floor((state!.lastFailure as number) / 1000) + resetSeconds + 1;
    await vi.waitFor(async () => expect(await keycloakSecondsNow(probe)).toBeGreaterThan(resetAt), {
      timeout: resetSeconds * 1000 + EVENTUALLY.timeout,
      interval: 500,
    });
    expect((await grant(user, 'wrong-password-4')).status).toBe(400);
    expect(await lockStateOf(user)).toMatchObject({ disabled: false, numFailures: 1 });
  }, 90_000);
});
