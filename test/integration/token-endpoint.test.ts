import { beforeAll, describe, expect, it } from 'vitest';
import { currentTotp } from '../helpers/totp.ts';
import {
  claimsOf,
  createOrganizationRealm,
  createUser,
  disableUser,
  expectAnswerSeconds,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

const SPEC_TOKEN_FIELDS = [
  'access_token',
  'expires_in',
  'refresh_expires_in',
  'refresh_token',
  'token_type',
  'id_token',
  'not-before-policy',
  'session_state',
  'scope',
];

describe('token endpoint through the gateway (spec 4.1, 5.2)', () => {
  let gateway: string;
  let admin: TestUser;
  let orgUser: TestUser;
  let otpUser: TestUser;
  let org: string;

  beforeAll(async () => {
    gateway = `${testEnv().publicUrl}/auth`;
    admin = await createUser('master');
    org = await createOrganizationRealm(['ws1']);
    orgUser = await createUser(org, { workspaceRoles: ['ws1'] });
    otpUser = await createUser(org, { otp: true });
  });

  it('issues a refresh token to an administrator with every field of spec 2.2', async () => {
    const { status, json } = await postToken(gateway, 'master', passwordGrantBody(admin));
    expect(status).toBe(200);
    for (const field of SPEC_TOKEN_FIELDS) expect(json).toHaveProperty([field]);
    expect(json.token_type).toBe('Bearer');
    expectAnswerSeconds(json.refresh_expires_in, 31536000);
    expectAnswerSeconds(json.expires_in, 86400);
    expect(String(json.scope).split(' ')).toEqual(
      expect.arrayContaining(['openid', 'email', 'profile', 'offline_access']),
    );
    expect(claimsOf(json.refresh_token).typ).toBe('Offline');
  });

  it('issues a new access token for the refresh token (refresh grant)', async () => {
    const first = await postToken(gateway, 'master', passwordGrantBody(admin));
    const body = `client_id=_platform-api&grant_type=refresh_token&refresh_token=${String(first.json.refresh_token)}`;
    const { status, json } = await postToken(gateway, 'master', body);
    expect(status).toBe(200);
    expect(typeof json.access_token).toBe('string');
    expect(json.access_token).not.toBe(first.json.access_token);
    expect(claimsOf(json.access_token).preferred_username).toBe(admin.username);
  });

  it('issues tokens whose iss is the public address of the gateway', async () => {
    for (const user of [admin, orgUser]) {
      const { json } = await postToken(gateway, user.realm, passwordGrantBody(user));
      expect(claimsOf(json.access_token).iss).toBe(
        `${testEnv().publicUrl}/auth/realms/${user.realm}`,
      );
    }
  });

  it('ignores forwarding headers sent by the client when deriving iss', async () => {
    const { json } = await postToken(gateway, 'master', passwordGrantBody(admin), {
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'https',
      forwarded: 'host=evil.example;proto=https',
    });
    expect(claimsOf(json.access_token).iss).toBe(`${testEnv().publicUrl}/auth/realms/master`);
  });

  it('serves organization users with _<org>-api, refresh grant included', async () => {
    const { status, json } = await postToken(gateway, org, passwordGrantBody(orgUser));
    expect(status).toBe(200);
    expectAnswerSeconds(json.refresh_expires_in, 31536000);
    const claims = claimsOf(json.access_token);
    expect(claims.azp).toBe(`_${org}-api`);
    expect(claims.resource_access).toMatchObject({ [`${org}-workspaces`]: { roles: ['ws1'] } });
    const refreshed = await postToken(
      gateway,
      org,
      `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${String(json.refresh_token)}`,
    );
    expect(refreshed.status).toBe(200);
    expect(typeof refreshed.json.access_token).toBe('string');
  });

  it('requires totp from a two-factor user and accepts a valid one', async () => {
    // A missing or wrong one-time password is wrong credentials: 401 (see below).
    const without = await postToken(gateway, org, passwordGrantBody(otpUser));
    expect(without.status).toBe(401);
    expect(without.json.error).toBe('invalid_grant');
    // No pause between the failures: the realms' quick-login check is off (brute-force.test.ts).
    const wrong = await postToken(gateway, org, passwordGrantBody(otpUser, '&totp=000000'));
    expect(wrong.status).toBe(401);
    const totp = currentTotp(otpUser.otpSecret!);
    const ok = await postToken(gateway, org, passwordGrantBody(otpUser, `&totp=${totp}`));
    expect(ok.status).toBe(200);
    expect(typeof ok.json.refresh_token).toBe('string');
  });

  it('takes the one-time password as `otp` too, a right one right after a wrong one', async () => {
    // Keycloak's direct grant reads `otp` first, then `totp`: a wrong `otp` is no answer to
    // give a right one again.
    const user = await createUser(org, { otp: true });
    const wrong = await postToken(gateway, org, passwordGrantBody(user, '&otp=000000'));
    expect(wrong.status).toBe(401);
    const otp = currentTotp(user.otpSecret!);
    const ok = await postToken(gateway, org, passwordGrantBody(user, `&otp=${otp}`));
    expect(ok.status).toBe(200);
    expect(typeof ok.json.refresh_token).toBe('string');
  });

  describe("passes Keycloak's own errors through unchanged", () => {
    const cases: Array<[string, string, () => string]> = [
      [
        'unknown realm',
        'no-such-realm',
        () => passwordGrantBody({ ...admin, realm: 'no-such-realm' }),
      ],
      [
        'unknown client',
        'master',
        () =>
          `client_id=nope&grant_type=password&scope=openid&username=${admin.username}&password=x`,
      ],
      ['missing grant type', 'master', () => 'client_id=_platform-api'],
      ['empty body', 'master', () => ''],
    ];
    it.each(cases)('%s', async (_name, realm, body) => {
      const direct = await postToken(testEnv().keycloakUrl, realm, body());
      const proxied = await postToken(gateway, realm, body());
      expect(direct.status).toBeGreaterThanOrEqual(400);
      expect(direct.status).toBeLessThan(500);
      expect(proxied.status).toBe(direct.status);
      expect(proxied.json).toEqual(direct.json);
      expect(proxied.headers.get('content-type')).toBe(direct.headers.get('content-type'));
    });
  });

  describe("wrong credentials answer 401, as before Keycloak 26.6, with Keycloak's body", () => {
    /** The same request to Keycloak directly and through the gateway. */
    async function bothWays(realm: string, body: string) {
      const direct = await postToken(testEnv().keycloakUrl, realm, body);
      const proxied = await postToken(gateway, realm, body);
      expect(proxied.json).toEqual(direct.json);
      expect(proxied.headers.get('content-type')).toBe(direct.headers.get('content-type'));
      return { direct, proxied };
    }

    it('a wrong or missing password, an unknown user: 401 invalid_grant "Invalid user credentials"', async () => {
      const user = await createUser(org);
      // Another user for the second failure: two in a second would lock `user` for a minute.
      const other = await createUser(org);
      for (const body of [
        passwordGrantBody({ ...user, password: 'not-the-password' }),
        `client_id=_${org}-api&grant_type=password&username=${other.username}`,
        passwordGrantBody({ ...user, username: `${user.username}-nobody` }),
      ]) {
        const { direct, proxied } = await bothWays(org, body);
        expect(direct.status).toBe(400);
        expect(proxied.status).toBe(401);
        expect(proxied.json).toEqual({
          error: 'invalid_grant',
          error_description: 'Invalid user credentials',
        });
      }
      // The right password is still served as Keycloak serves it.
      expect((await postToken(gateway, org, passwordGrantBody(user))).status).toBe(200);
    });

    it("a disabled account keeps Keycloak's 400 (it was 400 before 26.6 too)", async () => {
      const user = await createUser(org);
      await disableUser(user);
      const { direct, proxied } = await bothWays(org, passwordGrantBody(user));
      expect(direct.status).toBe(400);
      expect(proxied.status).toBe(400);
      expect(proxied.json).toMatchObject({ error: 'invalid_grant' });
      expect(proxied.json.error_description).not.toBe('Invalid user credentials');
    });

    it("a refresh grant's refusal is not wrong credentials: Keycloak's status", async () => {
      const login = await postToken(gateway, org, passwordGrantBody(orgUser));
      const refresh = String(login.json.refresh_token);
      const forged = `${refresh.slice(0, -4)}AAAA`;
      for (const token of [forged, 'not-a-token']) {
        const body = `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${token}`;
        const { direct, proxied } = await bothWays(org, body);
        expect(direct.status).toBeGreaterThanOrEqual(400);
        expect(direct.status).toBeLessThan(500);
        expect(proxied.status).toBe(direct.status);
      }
      const body = `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${refresh}`;
      expect((await postToken(gateway, org, body)).status).toBe(200);
    });
  });
});

describe('hostile token requests', () => {
  const gateway = () => `${testEnv().publicUrl}/auth`;

  it.each([
    ['broken percent escapes', Buffer.from('%%%&&&===')],
    ['invalid UTF-8', Buffer.from([0x63, 0x3d, 0xff, 0xfe, 0x26])],
  ])(
    "answers %s with 400 invalid_request instead of passing on Keycloak's 500",
    async (_n, body) => {
      const res = await fetch(`${gateway()}/realms/master/protocol/openid-connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body,
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: 'invalid_request' });
    },
  );

  it('answers a huge form body with 413 in the envelope', async () => {
    const res = await fetch(`${gateway()}/realms/master/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `client_id=_platform-api&password=${'a'.repeat(100_000)}`,
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ data: null, result: '413-00000' });
  });
});
