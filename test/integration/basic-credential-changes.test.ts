import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SETTLE_MS } from '../../src/audit/keycloak-event-pull.ts';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  sessionCount,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { createOrganization, migratedOwnDatabase } from '../helpers/platform.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { launchChromium, signIn } from '../helpers/browser.ts';
import { testEnv } from '../helpers/test-env.ts';
import { takeTurns } from '../helpers/turns.ts';

/**
 * A credential changed in Keycloak itself (its console or admin API), seen in the realm's
 * events the gateway pulls, ends the user's cached Basic logins at once: not up to
 * BASIC_CACHE_MAX_SECONDS (60 s here) later. The replica pulls Keycloak's events every second,
 * its clock ahead so that an event is taken about a second after Keycloak saved it, on a
 * database of the suite's own: its rounds cover this suite's realm and master, not every
 * organization other suites made in the shared one.
 */
// Each test waits for several pulls in turn: each wait may take up to EVENTUALLY on a loaded
// machine, so a test gets room for all of them, not the suite's default minute.
describe('Basic: credential changes made in Keycloak', { timeout: 5 * EVENTUALLY.timeout }, () => {
  takeTurns('keycloak-event-pulls');
  const clock = aheadClock();
  clock.advance(SETTLE_MS - 1000);
  const database = ownDatabase('credchanges');
  let db: Knex;
  let org: string;
  let replica: Replica;
  const path = () => `/api/${org}/platform/workspaces`;
  const statusOf = async (user: Pick<TestUser, 'username' | 'password'>) =>
    (await fetch(`${replica.url}${path()}`, { headers: { authorization: basicAuth(user) } }))
      .status;

  beforeAll(async () => {
    db = await migratedOwnDatabase(database);
    org = await createOrganization(['ws'], 0, db);
    replica = await startReplica(
      19976,
      {
        DATABASE_URL: database.url(),
        AUDIT_KEYCLOAK_EVENTS_SECONDS: '1',
        BASIC_CACHE_MAX_SECONDS: '60',
      },
      undefined,
      clock,
    );
    // The replica's first pull makes the realm save its events.
    const admin = await keycloakAdmin();
    await vi.waitFor(
      async () =>
        expect((await admin.realms.getConfigEvents({ realm: org })).eventsEnabled).toBe(true),
      { ...EVENTUALLY, interval: 200 },
    );
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  /**
   * Whether the auth area's pull has taken the user's Keycloak sign-in (so every event before it
   * too): the log's pull recorded it, and the auth area's cursor, which is apart, is past it.
   */
  async function signInPulled(userId: string): Promise<boolean> {
    const logins = (await db('audit_log')
      .where({ org, action: 'keycloak.login', actor_id: userId })
      .select('at')
      .limit(1)) as { at: Date }[];
    const cursors: { user_time: string | null }[] = await db('auth_keycloak_pulls')
      .where({ realm: org })
      .select('user_time');
    const [login] = logins;
    const taken = cursors[0]?.user_time;
    if (!login || taken === undefined || taken === null) return false;
    return Number(taken) >= new Date(login.at).getTime();
  }

  /**
   * A user with a Basic login cached on the replica: signed in, the events of its making taken
   * (they end logins made before them), and then served repeatedly without a new Keycloak session.
   */
  async function cachedUser(): Promise<{ user: TestUser; id: string }> {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOf(user)).toBe(200);
    await expect.poll(() => signInPulled(id), EVENTUALLY).toBe(true);
    expect(await statusOf(user)).toBe(200);
    const sessions = await sessionCount(user);
    for (let i = 0; i < 3; i++) expect(await statusOf(user)).toBe(200);
    expect(await sessionCount(user)).toBe(sessions);
    return { user, id };
  }

  it('refuses the old password once a reset in the console is seen, and takes the new', async () => {
    const { user, id } = await cachedUser();
    const other = await cachedUser();
    const otherSessions = await sessionCount(other.user);
    // As the console's "Reset password" does: the user's sessions are not ended.
    await (
      await keycloakAdmin()
    ).users.resetPassword({
      realm: org,
      id,
      credential: { type: 'password', value: 'the-new-password', temporary: false },
    });
    await expect.poll(() => statusOf(user), EVENTUALLY).toBe(401);
    expect(await statusOf({ ...user, password: 'the-new-password' })).toBe(200);
    // Another user's cached login is left alone.
    expect(await statusOf(other.user)).toBe(200);
    expect(await sessionCount(other.user)).toBe(otherSessions);
  });

  it('takes a password refused just before, once an administrator sets it in the console', async () => {
    // A fleet of jobs on a password the account no longer has: refused, then answered from the
    // failed-login memory. The administrator fixes the account by giving it the jobs' password.
    const { user, id } = await cachedUser();
    const stale = { ...user, password: `${user.password}-stale` };
    expect(await statusOf(stale)).toBe(401);
    const sessions = await sessionCount(user);
    expect(await statusOf(stale)).toBe(401);
    await (
      await keycloakAdmin()
    ).users.resetPassword({
      realm: org,
      id,
      credential: { type: 'password', value: stale.password, temporary: false },
    });
    await expect.poll(() => statusOf(stale), EVENTUALLY).toBe(200);
    expect(await sessionCount(user)).toBeGreaterThan(sessions);
    await expect.poll(() => statusOf(user), EVENTUALLY).toBe(401);
  });

  it('takes the right password refused during a lockout, once an administrator unlocks the user', async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    // Keycloak's own lockout (the realm's 30 failures), reached at its own port: while it lasts
    // Keycloak refuses the right password as a wrong one, and the gateway remembers that refusal.
    const wrong = passwordGrantBody({ ...user, password: `${user.password}-wrong` });
    for (let i = 0; i < 30; i++) {
      expect((await postToken(testEnv().keycloakUrl, org, wrong)).status).toBe(400);
    }
    const admin = await keycloakAdmin();
    expect(await admin.attackDetection.findOne({ realm: org, id })).toMatchObject({
      disabled: true,
    });
    expect(await statusOf(user)).toBe(401);
    expect(await statusOf(user)).toBe(401);
    // The console's "Unlock" on the user's brute-force status.
    await admin.attackDetection.del({ realm: org, id });
    await expect.poll(() => statusOf(user), EVENTUALLY).toBe(200);
  });

  it('refuses a password alone once an administrator requires an OTP', async () => {
    const { user, id } = await cachedUser();
    // The console's "Required user actions: Configure OTP": the next sign-in sets one up.
    await (
      await keycloakAdmin()
    ).users.update({ realm: org, id }, { requiredActions: ['CONFIGURE_TOTP'] });
    await expect.poll(() => statusOf(user), EVENTUALLY).toBe(401);
  });

  it('refuses the old password once the user changed it in the account console (default ticks)', async () => {
    const { user } = await cachedUser();
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(20_000);
      // The account console's "Update" of the password: its client asks Keycloak for the
      // UPDATE_PASSWORD action (PKCE as the console does; the code is never exchanged here).
      const account = `${testEnv().publicUrl}/auth/realms/${org}`;
      const query = new URLSearchParams({
        client_id: 'account-console',
        redirect_uri: `${account}/account/`,
        response_type: 'code',
        scope: 'openid',
        kc_action: 'UPDATE_PASSWORD',
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
      });
      await page.goto(`${account}/protocol/openid-connect/auth?${query.toString()}`);
      await signIn(page, user.username, user.password);
      await page.waitForSelector('#password-new');
      await page.type('#password-new', 'changed-by-the-user');
      await page.type('#password-confirm', 'changed-by-the-user');
      await Promise.all([page.waitForNavigation(), page.click('[type=submit]')]);
      expect(new URL(page.url()).pathname).toContain('/account');
    } finally {
      await browser.close();
    }
    await expect.poll(() => statusOf(user), EVENTUALLY).toBe(401);
    expect(await statusOf({ ...user, password: 'changed-by-the-user' })).toBe(200);
  }, 90_000);
});
