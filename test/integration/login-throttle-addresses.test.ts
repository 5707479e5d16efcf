import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  authorizeUrl,
  cookieHeaderOf,
  createBrowserClient,
  formActionOf,
} from '../helpers/browser-login.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { startGzipFront, type GzipFront } from '../helpers/gzip-front.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  uniqueId,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { currentTotp } from '../helpers/totp.ts';

/**
 * A user name and password posted from `address` to a login form (where it posts, with the
 * login's cookies) as a browser posts it: accepting compressed answers, which the throttle must
 * read all the same.
 */
function postLogin(
  address: string,
  form: { url: string; cookie: string },
  user: TestUser,
  password: string,
) {
  return requestFrom(address, form.url, {
    method: 'POST',
    headers: {
      cookie: form.cookie,
      'content-type': 'application/x-www-form-urlencoded',
      'accept-encoding': 'gzip, deflate, br',
    },
    body: new URLSearchParams({ username: user.username, password }).toString(),
  });
}

/**
 * The login throttle counts per (realm, user, client address), on Basic and on the token
 * endpoint alike, with the shipped limits: clients are told apart by their real source address
 * (sockets bound to 127.0.0.x, no X-Forwarded-For), so guessing from one address never locks
 * the account's owner out elsewhere, and Keycloak's own lockout (30 failures) is not reached.
 * Port 18520/18521.
 */
describe('login throttle per account and address, from several source addresses', () => {
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    replica = await startReplica(18520, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}addresses:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      // Every login here is a first one: the owner's Basic call must reach Keycloak.
      BASIC_CACHE_MAX_SECONDS: '0',
    });
    org = await createOrganization(['ws1']);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  const apiPath = () => `${replica.url}/api/${org}/platform/workspaces`;
  const tokenUrl = () => `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`;

  /** A browser-flow client of the realm, whose login pages the form tests post to. */
  let browserClient: string | undefined;

  /** A real login page's form: its address on the replica, with the cookies Keycloak set. */
  async function loginPage(): Promise<{ url: string; cookie: string }> {
    browserClient ??= await createBrowserClient(org);
    const page = await fetch(authorizeUrl(replica.url, org, browserClient), {
      redirect: 'manual',
    });
    expect(page.status).toBe(200);
    const cookie = cookieHeaderOf(page.headers.getSetCookie());
    return { url: formActionOf(replica.url, await page.text()), cookie };
  }

  function basicFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(address, apiPath(), {
      headers: { authorization: basicAuth({ ...user, password }) },
    });
  }

  function grantFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(address, tokenUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: passwordGrantBody({ ...user, password }),
    });
  }

  /** Keycloak's own count of the user's failed logins, and whether it has locked the account. */
  async function keycloakLock(user: TestUser) {
    const admin = await keycloakAdmin();
    const state = await admin.attackDetection.findOne({ realm: org, id: await userIdOf(user) });
    return { failures: Number(state?.numFailures ?? 0), locked: state?.disabled === true };
  }

  it('40 guesses over Basic and 40 on the token endpoint from one address: that address is refused, the owner elsewhere is not', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const basicStatuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      basicStatuses.push((await basicFrom('127.0.0.2', owner, `guess-${i}`)).status);
    }
    expect(basicStatuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(basicStatuses.slice(5).every((status) => status === 429)).toBe(true);

    // One throttle: the token endpoint refuses the same pair at once, in the shape token
    // clients parse, and the right password from this address too.
    for (let i = 0; i < 40; i++) {
      const refused = await grantFrom('127.0.0.2', owner, `grant-guess-${i}`);
      expect(refused.status).toBe(429);
      const wait = Number(refused.headers['retry-after']);
      expect(wait).toBeGreaterThan(0);
      expect(refused.json).toEqual({
        error: 'too_many_attempts',
        error_description: `Too many failed logins of this account from your address; retry in ${wait} s.`,
      });
    }
    const basicRefused = await basicFrom('127.0.0.2', owner);
    expect(basicRefused.status).toBe(429);
    expect(basicRefused.json).toMatchObject({ data: null, result: '429-00001' });
    expect(Number(basicRefused.headers['retry-after'])).toBeGreaterThan(0);

    expect(await keycloakLock(owner)).toEqual({ failures: 5, locked: false });

    // The owner, from another address: a token, and served over Basic and Bearer.
    const granted = await grantFrom('127.0.0.3', owner);
    expect(granted.status).toBe(200);
    expect((await basicFrom('127.0.0.3', owner)).status).toBe(200);
    const bearer = await requestFrom('127.0.0.3', apiPath(), {
      headers: { authorization: `Bearer ${granted.json.access_token as string}` },
    });
    expect(bearer.status).toBe(200);
    // The owner's success clears Keycloak's count; the guessing address stays refused.
    expect(await keycloakLock(owner)).toEqual({ failures: 0, locked: false });
    expect((await grantFrom('127.0.0.2', owner)).status).toBe(429);
  });

  it('guessing on the token endpoint first: 5 reach Keycloak, then 429; Basic from another address is served', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      statuses.push((await grantFrom('127.0.0.4', owner, `guess-${i}`)).status);
    }
    // A wrong password is refused with 401 invalid_grant (Keycloak's 400, see wrong-credentials.ts).
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses.slice(5).every((status) => status === 429)).toBe(true);
    expect(await keycloakLock(owner)).toEqual({ failures: 5, locked: false });
    expect((await basicFrom('127.0.0.5', owner)).status).toBe(200);
    expect((await basicFrom('127.0.0.4', owner)).status).toBe(429);
  });

  it('refresh grants are not password guesses: neither counted nor refused', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const login = await grantFrom('127.0.0.8', owner);
    expect(login.status).toBe(200);
    for (let i = 0; i < 5; i++) {
      expect((await grantFrom('127.0.0.8', owner, `guess-${i}`)).status).toBe(401);
    }
    expect((await grantFrom('127.0.0.8', owner)).status).toBe(429);
    const refreshed = await requestFrom('127.0.0.8', tokenUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: `_${org}-api`,
        grant_type: 'refresh_token',
        refresh_token: login.json.refresh_token as string,
      }).toString(),
    });
    expect(refreshed.status).toBe(200);
  });

  it('a success from an address clears that pair: the next failures count from 0', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    for (let i = 0; i < 4; i++) {
      expect((await basicFrom('127.0.0.9', owner, `guess-${i}`)).status).toBe(401);
    }
    expect((await grantFrom('127.0.0.9', owner)).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      expect((await grantFrom('127.0.0.9', owner, `again-${i}`)).status).toBe(401);
    }
    expect((await grantFrom('127.0.0.9', owner, 'again-5')).status).toBe(429);
  });

  it('a stale-password job never stops the owner, and reaches Keycloak once', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const jobStatuses: number[] = [];
    const ownerStatuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      jobStatuses.push(
        (await basicFrom('127.0.0.6', owner, 'the-password-before-rotation')).status,
      );
      if (i % 10 === 5) {
        ownerStatuses.push((await grantFrom('127.0.0.7', owner)).status);
        ownerStatuses.push((await basicFrom('127.0.0.7', owner)).status);
      }
    }
    expect(ownerStatuses).toEqual(Array.from({ length: 12 }, () => 200));
    // The first refusal is remembered for the window: every repeat gets the same 401 from the
    // gateway, counted once, so the job's own right password would still go through.
    expect(jobStatuses).toEqual(jobStatuses.map(() => 401));
    expect(await keycloakLock(owner)).toEqual({ failures: 0, locked: false });
    expect((await basicFrom('127.0.0.6', owner)).status).toBe(200);
  });

  /** A user name and password posted to `form` (a login page's, else a fresh one) from `address`. */
  async function postForm(
    address: string,
    user: TestUser,
    password: string,
    form?: { url: string; cookie: string },
  ) {
    return postLogin(address, form ?? (await loginPage()), user, password);
  }

  it("Keycloak's login form is counted by the same throttle, per account and address", async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    // Keycloak shows its login form again, with its error.
    for (let i = 0; i < 5; i++)
      expect((await postForm('127.0.0.10', owner, `guess-${i}`)).status).toBe(200);
    expect(await keycloakLock(owner)).toEqual({ failures: 5, locked: false });
    const refused = await postForm('127.0.0.10', owner, 'guess-5');
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ data: null, result: '429-00001' });
    expect((await grantFrom('127.0.0.10', owner)).status).toBe(429);
    expect((await grantFrom('127.0.0.11', owner)).status).toBe(200);
  });

  it('a login form posted again (a redirect back to the form, nothing checked) clears no failure', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const form = await loginPage();
    expect((await postForm('127.0.0.15', owner, 'guess-0', form)).status).toBe(200);
    for (let i = 1; i < 4; i++)
      expect((await postForm('127.0.0.15', owner, `guess-${i}`)).status).toBe(200);
    // The first page's form again: Keycloak sends the browser back to its login page.
    expect((await postForm('127.0.0.15', owner, 'guess-4', form)).status).toBe(302);
    expect((await postForm('127.0.0.15', owner, 'guess-5')).status).toBe(200);
    expect(await keycloakLock(owner)).toEqual({ failures: 5, locked: false });
    expect((await postForm('127.0.0.15', owner, 'guess-6')).status).toBe(429);
  });

  it('a login form the throttle cannot read (multipart) is refused, never read by Keycloak', async () => {
    // Keycloak reads a multipart body posted to its login form as the form: without this
    // refusal, guesses sent that way would go round the throttle.
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const postMultipart = async (password: string) => {
      const { url, cookie } = await loginPage();
      const boundary = 'form-boundary';
      const fields = { username: owner.username, password, credentialId: '' };
      const body =
        Object.entries(fields)
          .map(
            ([name, value]) =>
              `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
          )
          .join('') + `--${boundary}--\r\n`;
      return requestFrom('127.0.0.13', url, {
        method: 'POST',
        headers: { cookie, 'content-type': `multipart/form-data; boundary=${boundary}` },
        body,
      });
    };
    for (let i = 0; i < 7; i++) {
      const refused = await postMultipart(`guess-${i}`);
      expect(refused.status).toBe(400);
      expect(refused.json).toMatchObject({ data: null, result: '400-00002' });
    }
    expect(await keycloakLock(owner)).toEqual({ failures: 0, locked: false });
    // Not a way in either: the right password, sent that way, logs nobody in.
    expect((await postMultipart(owner.password)).status).toBe(400);
  });

  it("a two-factor user's right password on the login form is not a failure", async () => {
    // Keycloak answers it with its one-time-password page (200), as it answers a wrong one
    // with the login page again (200): only the first may not be counted.
    const owner = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++)
      statuses.push((await postForm('127.0.0.14', owner, owner.password)).status);
    expect(statuses).toEqual(Array.from({ length: 7 }, () => 200));
  });

  it('a self-registration Keycloak refuses is no failed login: the newcomer registers, then logs in', async () => {
    await loginPage();
    const admin = await keycloakAdmin();
    await admin.realms.update({ realm: org }, { registrationAllowed: true });
    const registrationUrl = authorizeUrl(replica.url, org, browserClient!, 'registrations');
    const newcomer = {
      username: uniqueId('newcomer-'),
      password: randomBytes(12).toString('base64url'),
    };
    const register = async (confirmation: string) => {
      const page = await requestFrom('127.0.0.16', registrationUrl);
      expect(page.status).toBe(200);
      const cookie = cookieHeaderOf(page.headers['set-cookie']);
      return requestFrom('127.0.0.16', formActionOf(replica.url, page.text), {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          username: newcomer.username,
          email: `${newcomer.username}@example.com`,
          firstName: 'New',
          lastName: 'Comer',
          password: newcomer.password,
          'password-confirm': confirmation,
        }).toString(),
      });
    };
    // A mistyped confirmation, more times than the account's limit: Keycloak's form again,
    // with its error; the password is being chosen, not checked.
    for (let i = 0; i < 6; i++) {
      const refused = await register(`mistyped-${i}`);
      expect(refused.status, `registration ${i}`).toBe(200);
      expect(refused.text).toMatch(/name="password-confirm"/);
    }
    const registered = await register(newcomer.password);
    expect(registered.status).toBe(302);
    expect(String(registered.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
    const login = await postForm('127.0.0.16', { realm: org, ...newcomer }, newcomer.password);
    expect(login.status).toBe(302);
    expect(String(login.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
  });

  it('a token request the throttle cannot read (not a URL-encoded form) never reaches Keycloak', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const sent = await requestFrom('127.0.0.12', tokenUrl(), {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: passwordGrantBody({ ...owner, password: 'guess' }),
    });
    expect(sent.status).toBe(400);
    expect(sent.json).toMatchObject({ error: 'invalid_request' });
    expect(await keycloakLock(owner)).toEqual({ failures: 0, locked: false });
  });
});

/**
 * The login pages whose posts name no account: Keycloak's Organizations feature makes a realm's
 * login identity-first (a page for the user name, then one posting only `password`), and the
 * one-time-password page posts only `otp`. Such a post is still a guess: it counts against its
 * address's limit (5 here). Port 18522/18523.
 */
describe('login throttle on login pages that post no user name', () => {
  let replica: Replica;
  let org: string;
  let browserClient: string;

  beforeAll(async () => {
    replica = await startReplica(18522, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}identity-first:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      LOGIN_MAX_FAILURES_PER_ADDRESS: '5',
    });
    org = await createOrganization(['ws1']);
    const admin = await keycloakAdmin();
    await admin.realms.update({ realm: org }, { organizationsEnabled: true });
    // With an organization in the realm, Keycloak's login page asks for the user name alone.
    await admin.organizations.create({
      realm: org,
      name: `partner-${randomBytes(4).toString('hex')}`,
      domains: [{ name: 'partner.example', verified: false }],
    });
    browserClient = await createBrowserClient(org);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  const actionOf = (page: string) => formActionOf(replica.url, page);

  /** Posts `fields` to `url` from `address` with the login's cookies. */
  const post = (address: string, url: string, cookie: string, fields: Record<string, string>) =>
    requestFrom(address, url, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });

  /** A login up to its password page: the user name posted alone, as the first page asks. */
  async function passwordPage(address: string, user: TestUser) {
    const first = await requestFrom(address, authorizeUrl(replica.url, org, browserClient));
    expect(first.status).toBe(200);
    expect(first.text).not.toMatch(/name="password"/);
    const cookie = cookieHeaderOf(first.headers['set-cookie']);
    const second = await post(address, actionOf(first.text), cookie, { username: user.username });
    expect(second.status).toBe(200);
    expect(second.text).toMatch(/name="password"/);
    expect(second.text).not.toMatch(/name="username"/);
    return { url: actionOf(second.text), cookie };
  }

  const keycloakFailures = async (user: TestUser) => {
    const admin = await keycloakAdmin();
    const state = await admin.attackDetection.findOne({ realm: org, id: await userIdOf(user) });
    return Number(state?.numFailures ?? 0);
  };

  it('passwords posted without a user name count against the address: 429 after 5', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const { url, cookie } = await passwordPage('127.0.0.20', owner);
      const guess = await post('127.0.0.20', url, cookie, { password: `guess-${i}` });
      statuses.push(guess.status);
      if (guess.status === 429) expect(guess.json).toMatchObject({ result: '429-00001' });
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(await keycloakFailures(owner)).toBe(5);
  });

  it('a burst of right logins, password without a user name, is never refused', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    for (let i = 0; i < 8; i++) {
      const { url, cookie } = await passwordPage('127.0.0.21', owner);
      const login = await post('127.0.0.21', url, cookie, { password: owner.password });
      expect(login.status).toBe(302);
      expect(String(login.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
    }
  });

  it('wrong one-time passwords on the login form count against the address', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
    const { url, cookie } = await passwordPage('127.0.0.22', owner);
    const otpPage = await post('127.0.0.22', url, cookie, { password: owner.password });
    expect(otpPage.status).toBe(200);
    expect(otpPage.text).toMatch(/name="otp"/);
    let action = actionOf(otpPage.text);
    const wrong = currentTotp(owner.otpSecret!) === '000000' ? '111111' : '000000';
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const guess = await post('127.0.0.22', action, cookie, { otp: wrong });
      statuses.push(guess.status);
      if (guess.status === 200) action = actionOf(guess.text);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    // The right one from this address is refused too; from another, it logs in.
    expect(
      (await post('127.0.0.22', action, cookie, { otp: currentTotp(owner.otpSecret!) })).status,
    ).toBe(429);
    const other = await passwordPage('127.0.0.23', owner);
    const otherOtp = await post('127.0.0.23', other.url, other.cookie, {
      password: owner.password,
    });
    const login = await post('127.0.0.23', actionOf(otherOtp.text), other.cookie, {
      otp: currentTotp(owner.otpSecret!),
    });
    expect(login.status).toBe(302);
    expect(String(login.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
  });

  it('wrong one-time passwords posted beside a password count too (Keycloak checks the one-time password alone)', async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
    const { url, cookie } = await passwordPage('127.0.0.28', owner);
    const otpPage = await post('127.0.0.28', url, cookie, { password: owner.password });
    expect(otpPage.text).toMatch(/name="otp"/);
    let action = actionOf(otpPage.text);
    const wrong = currentTotp(owner.otpSecret!) === '000000' ? '111111' : '000000';
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const guess = await post('127.0.0.28', action, cookie, { otp: wrong, password: 'any' });
      statuses.push(guess.status);
      if (guess.status === 200) {
        // Keycloak's answer: its one-time password page again, with no password field.
        expect(guess.text).toMatch(/name="otp"/);
        expect(guess.text).not.toMatch(/name="password"/);
        action = actionOf(guess.text);
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    // The right one beside a password, from another address, logs in.
    const other = await passwordPage('127.0.0.29', owner);
    const otherOtp = await post('127.0.0.29', other.url, other.cookie, {
      password: owner.password,
    });
    const login = await post('127.0.0.29', actionOf(otherOtp.text), other.cookie, {
      otp: currentTotp(owner.otpSecret!),
      password: 'any',
    });
    expect(login.status).toBe(302);
    expect(String(login.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
  });

  it('wrong recovery codes on the login form count against the address; a right one logs in', async () => {
    const admin = await keycloakAdmin();
    // Recovery codes as a second factor of the realm's browser login, beside the one-time password.
    const executions = await admin.authenticationManagement.getExecutions({
      realm: org,
      flow: 'browser',
    });
    const recovery = executions.find((e) => e.providerId === 'auth-recovery-authn-code-form')!;
    await admin.authenticationManagement.registerRequiredAction({
      realm: org,
      providerId: 'CONFIGURE_RECOVERY_AUTHN_CODES',
      name: 'Recovery Authentication Codes',
    });
    await admin.authenticationManagement.updateExecution(
      { realm: org, flow: 'browser' },
      { ...recovery, requirement: 'ALTERNATIVE' },
    );
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    await admin.users.update(
      { realm: org, id: await userIdOf(owner) },
      { requiredActions: ['CONFIGURE_RECOVERY_AUTHN_CODES'] },
    );
    // The first login sets the codes up (Keycloak's page shows them).
    const setup = await passwordPage('127.0.0.25', owner);
    let setupPage = await post('127.0.0.25', setup.url, setup.cookie, { password: owner.password });
    if (setupPage.status === 302) {
      // Redirected to the required action's page.
      expect(String(setupPage.headers.location)).toMatch(/\/login-actions\//);
      setupPage = await requestFrom('127.0.0.25', String(setupPage.headers.location), {
        headers: { cookie: setup.cookie },
      });
    }
    expect(setupPage.status).toBe(200);
    const hidden = (name: string) =>
      new RegExp(`name="${name}" value="([^"]*)"`).exec(setupPage.text)![1]!;
    const generated = hidden('generatedRecoveryAuthnCodes');
    const saved = await post('127.0.0.25', actionOf(setupPage.text), setup.cookie, {
      generatedRecoveryAuthnCodes: generated,
      generatedAt: hidden('generatedAt'),
      userLabel: hidden('userLabel'),
    });
    expect(saved.status).toBe(302);
    const codes = generated.split(',');

    /** A login up to its recovery-code page, from `address`. */
    const recoveryPage = async (address: string) => {
      const { url, cookie } = await passwordPage(address, owner);
      const page = await post(address, url, cookie, { password: owner.password });
      expect(page.status).toBe(200);
      expect(page.text).toMatch(/name="recoveryCodeInput"/);
      return { url: actionOf(page.text), cookie };
    };
    const guessing = await recoveryPage('127.0.0.26');
    let action = guessing.url;
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const guess = await post('127.0.0.26', action, guessing.cookie, {
        recoveryCodeInput: `guess${i}`.padEnd(12, '0'),
      });
      statuses.push(guess.status);
      if (guess.status === 200) action = actionOf(guess.text);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    // A right code from another address logs in, again and again.
    for (const code of codes.slice(0, 6)) {
      const other = await recoveryPage('127.0.0.27');
      const login = await post('127.0.0.27', other.url, other.cookie, { recoveryCodeInput: code });
      expect(login.status).toBe(302);
      expect(String(login.headers.location)).toMatch(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
    }
  });

  it('a body the gateway cannot read is refused on every login-actions POST, as on the login form', async () => {
    const boundary = 'form-boundary';
    const body =
      `--${boundary}\r\nContent-Disposition: form-data; name="username"\r\n\r\nadmin\r\n` +
      `--${boundary}--\r\n`;
    for (const realm of ['master', org]) {
      for (const action of [
        'reset-credentials',
        'first-broker-login',
        'post-broker-login',
        'required-action',
        'registration',
        'action-token',
        'anything',
      ]) {
        const url = `${replica.url}/auth/realms/${realm}/login-actions/${action}?client_id=${browserClient}`;
        const sent = await requestFrom('127.0.0.24', url, {
          method: 'POST',
          headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
          body,
        });
        expect(sent.status, url).toBe(400);
        expect(sent.json, url).toMatchObject({ data: null, result: '400-00002' });
      }
    }
  });
});

/**
 * A front between the gateway and Keycloak that compresses Keycloak's pages for a client that
 * accepts it (as a reverse proxy with gzip on does): the throttle reads the answer to a login
 * form all the same, so a right password is never counted. Port 18524/18525.
 */
describe('login throttle behind a front that compresses pages', () => {
  let front: GzipFront | undefined;
  let replica: Replica;
  let org: string;
  let browserClient: string;

  beforeAll(async () => {
    front = await startGzipFront(testEnv().keycloakUrl, (answer) =>
      String(answer.headers['content-type']).startsWith('text/html'),
    );
    replica = await startReplica(18524, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}compressed:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      KEYCLOAK_URL: front.url,
    });
    org = await createOrganization(['ws1']);
    browserClient = await createBrowserClient(org);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  /** A user name and password posted to a fresh login page from `address`, as a browser asks. */
  async function postForm(address: string, user: TestUser, password: string) {
    const page = await requestFrom(address, authorizeUrl(replica.url, org, browserClient));
    expect(page.status).toBe(200);
    const form = {
      url: formActionOf(replica.url, page.text),
      cookie: cookieHeaderOf(page.headers['set-cookie']),
    };
    return postLogin(address, form, user, password);
  }

  it("a two-factor user's right password is never a failure; wrong ones are", async () => {
    const owner = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++)
      statuses.push((await postForm('127.0.0.30', owner, owner.password)).status);
    expect(statuses).toEqual(Array.from({ length: 7 }, () => 200));
    const guesses: number[] = [];
    for (let i = 0; i < 6; i++)
      guesses.push((await postForm('127.0.0.30', owner, `guess-${i}`)).status);
    expect(guesses).toEqual([200, 200, 200, 200, 200, 429]);
  });
});
