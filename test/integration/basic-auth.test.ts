import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  createUser,
  disableUser,
  keycloakAdmin,
  sessionCount,
  userIdOf,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';

const BASIC_CACHE_MAX_SECONDS = 3;

describe('Basic authentication', () => {
  let org: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    org = await createOrganization(['ws']);
  });
  afterAll(closeTestDb);

  it('accepts a password containing colons (split at the first one)', async () => {
    const user = await createUser(org, { password: 'pa:ss:word:' });
    const res = await callApi(path(), basicAuth(user));
    expect(res.status).toBe(200);
  });

  it('accepts a non-ASCII user name sent as UTF-8', async () => {
    const user = await createUser(org, {
      username: `jürgen-${Date.now()}`,
      password: 'pässwörd-ü',
    });
    const res = await callApi(path(), basicAuth(user));
    expect(res.status).toBe(200);
  });

  it.each([
    ['invalid base64', 'Basic %%%not-base64%%%', 'not valid base64'],
    [
      'base64 without padding',
      `Basic ${Buffer.from('a:bc').toString('base64').replace(/=+$/, '')}x`,
      'base64',
    ],
    ['no colon', `Basic ${Buffer.from('userpassword').toString('base64')}`, 'user:password'],
    [
      'empty user name',
      `Basic ${Buffer.from(':password').toString('base64')}`,
      'user name and a password',
    ],
    [
      'empty password',
      `Basic ${Buffer.from('user:').toString('base64')}`,
      'user name and a password',
    ],
    ['only a colon', `Basic ${Buffer.from(':').toString('base64')}`, 'user name and a password'],
    ['not UTF-8', `Basic ${Buffer.from([0x75, 0x3a, 0xff, 0xfe]).toString('base64')}`, 'UTF-8'],
    ['nothing after the scheme', 'Basic ', 'missing'],
  ])('refuses %s with 401 and a Basic challenge', async (_name, header, message) => {
    const res = await callApi(path(), header);
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({ data: null, result: '401-00002' });
    expect(res.body.message).toContain(message);
    expect(res.headers.get('www-authenticate')).toMatch(new RegExp(`Basic realm="${org}"`));
  });

  it('answers a 20 KB Authorization header with 431 in the envelope', async () => {
    const res = await fetch(`http://127.0.0.1:18000${path()}`, {
      headers: { authorization: `Basic ${'a'.repeat(20_000)}` },
    });
    expect(res.status).toBe(431);
    expect(await res.json()).toMatchObject({ data: null, result: '431-00000' });
  });

  it('tells a two-factor user to use Bearer', async () => {
    const user = await createUser(org, { otp: true });
    const res = await callApi(path(), basicAuth(user));
    expect(res.status).toBe(401);
    expect(res.body.result).toBe('401-00002');
    expect(res.body.message).toMatch(/two-factor.*Bearer/);
  });

  it('tells a two-factor user logging in by e-mail to use Bearer, and only such a user', async () => {
    const admin = await keycloakAdmin();
    const byEmail = async (user: { username: string; password: string }) => {
      const email = `${user.username}@example.com`;
      await admin.users.update(
        { realm: org, id: await userIdOf({ ...user, realm: org }) },
        { email },
      );
      return callApi(path(), basicAuth({ username: email, password: user.password }));
    };
    const twoFactor = await byEmail(await createUser(org, { otp: true }));
    expect([twoFactor.status, twoFactor.body.message]).toEqual([
      401,
      expect.stringMatching(/two-factor.*Bearer/),
    ]);
    const wrong = await byEmail({ ...(await createUser(org)), password: 'not-the-password' });
    expect([wrong.status, wrong.body.message]).toEqual([401, 'Invalid user name or password.']);
  });

  it('never echoes the password in an error', async () => {
    const user = await createUser(org);
    const res = await callApi(path(), basicAuth({ ...user, password: 'wrong-Secret-Value-123' }));
    expect(res.status).toBe(401);
    expect(JSON.stringify(res.body)).not.toContain('wrong-Secret-Value-123');
    expect(res.body.message).toBe('Invalid user name or password.');
  });

  it('makes one password grant for 50 concurrent cold identical requests', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws'] });
    const results = await Promise.all(
      Array.from({ length: 50 }, () => callApi(path(), basicAuth(user))),
    );
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 50 }, () => 200));
    // Each password grant opens one Keycloak session: one session means one grant.
    expect(await sessionCount(user)).toBe(1);
    // Warm requests reuse the cached login too.
    for (let i = 0; i < 5; i++) expect((await callApi(path(), basicAuth(user))).status).toBe(200);
    expect(await sessionCount(user)).toBe(1);
  });

  describe('within BASIC_CACHE_MAX_SECONDS (a replica whose clock the test advances)', () => {
    const clock = aheadClock();
    let replica: Replica;
    beforeAll(async () => {
      replica = await startReplica(
        19300,
        { BASIC_CACHE_MAX_SECONDS: String(BASIC_CACHE_MAX_SECONDS) },
        undefined,
        clock,
      );
    });
    afterAll(() => replica.gateway.close());

    const statusOf = async (user: { realm: string; username: string; password: string }) =>
      (await fetch(`${replica.url}${path()}`, { headers: { authorization: basicAuth(user) } }))
        .status;
    const pastTheCacheBound = () => clock.advance(BASIC_CACHE_MAX_SECONDS * 1000 + 500);

    it('stops accepting a changed password', async () => {
      const user = await createUser(org);
      expect(await statusOf(user)).toBe(200);
      const admin = await keycloakAdmin();
      await admin.users.resetPassword({
        realm: org,
        id: await userIdOf(user),
        credential: { type: 'password', value: 'the-new-password', temporary: false },
      });
      // Served from the cache until its bound...
      expect(await statusOf(user)).toBe(200);
      pastTheCacheBound();
      // ...then Keycloak is asked again.
      expect(await statusOf(user)).toBe(401);
      expect(await statusOf({ ...user, password: 'the-new-password' })).toBe(200);
    });

    it('stops accepting a disabled user', async () => {
      const user = await createUser(org);
      expect(await statusOf(user)).toBe(200);
      await disableUser(user);
      pastTheCacheBound();
      const res = await fetch(`${replica.url}${path()}`, {
        headers: { authorization: basicAuth(user) },
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ result: '401-00002' });
    });
  });
});
