import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO } from '../../src/demo/seed-demo.ts';
import { basicAuth } from '../helpers/api.ts';
import { launchChromium, screenshot, signIn } from '../helpers/browser.ts';
import { ADMIN_URL, PUBLIC_URL, ROOT, startComposeStack, type ComposeStack } from './stack.ts';
import { apiCall, printFigures, tokenGrant, welcomeOf, type Welcome } from './walk.ts';

const bash = promisify(execFile);

/*
 * The local stack as the README starts it (`docker compose up -d --build`, no profile, nothing
 * set but the image names): the welcome text in the gateway's log, its curl commands as pasted,
 * the spec's walk through port 8000, and Keycloak's console on the admin address in Chromium.
 */

let stack: ComposeStack;
let welcome: Welcome;
const org = DEMO.organization;
const workspacesPath = `/api/${org}/platform/workspaces`;
const operationsPath = `/api/${org}/workspaces/${DEMO.workspace}/ita/menu/operation_list/filter/`;
const tokensPath = `/api/${org}/platform/users/_current/refresh_tokens`;

describe('the local stack: docker compose up', () => {
  beforeAll(async () => {
    stack = await startComposeStack({
      // Ready when the demo data exists and the welcome text is printed.
      readyLog: { gateway: /realmgate demo is ready/ },
    });
    welcome = welcomeOf(await stack.logs('gateway'));
    printFigures('local stack up', {
      'up (build from cache, first start of Keycloak, demo data) until the welcome text': `${stack.upSeconds.toFixed(1)} s`,
    });
  }, 600_000);

  afterAll(async () => {
    await stack?.down();
  }, 120_000);

  it("is the README's one Docker command", () => {
    // What testcontainers runs for DockerComposeEnvironment.withBuild().up() (its compose
    // client: `up -d` and `--build`), with the image names and a project name in the environment.
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('`docker compose up -d --build`');
  });

  it("prints npm start's welcome in the gateway's log, and its curl commands work as pasted", async () => {
    expect(welcome.text).toContain(`public  {base_url}:           ${PUBLIC_URL}`);
    expect(welcome.text).toContain(`admin   {admin_site_address}: ${ADMIN_URL}`);
    expect(welcome.consoleUrl).toBe(`${ADMIN_URL}/auth/admin/master/console/#/realms/master`);
    // 1. and 2.: the administrator's refresh token, then an access token from it.
    const script = [...welcome.commands(1), ...welcome.commands(2), 'printf %s "$ACCESS"'].join(
      '\n',
    );
    const access = (await bash('bash', ['-c', script], { timeout: 60_000 })).stdout;
    expect(access.split('.')).toHaveLength(3);
    const organizations = await apiCall<{ id: string }[]>(
      '/api/platform/organizations',
      `Bearer ${access}`,
    );
    expect(organizations.status).toBe(200);
    expect(organizations.json.data.map((o) => o.id)).toContain(org);
    // 3.: the organization user's tokens; and the health line.
    const [grant] = welcome.commands(3);
    const answer = JSON.parse(
      (await bash('bash', ['-c', grant!], { timeout: 60_000 })).stdout,
    ) as unknown;
    expect(answer).toMatchObject({
      token_type: 'Bearer',
      refresh_token: expect.any(String) as string,
    });
    const health = (await bash('bash', ['-c', welcome.healthCommand], { timeout: 60_000 })).stdout;
    // Ready (every dependency up, or some degraded): the success result either way.
    expect(JSON.parse(health) as unknown).toMatchObject({ result: '000-00000' });
  }, 120_000);

  it('walks the spec through port 8000: grants, Basic and Bearer on the three lists, refresh tokens', async () => {
    const user = { username: DEMO.user, password: welcome.demoPassword };
    const admin = { username: DEMO.adminUser, password: welcome.demoPassword };
    // 4.1: password grant with a refresh token, then the refresh grant.
    const login = await tokenGrant(org, {
      grant_type: 'password',
      scope: 'openid offline_access',
      username: user.username,
      password: user.password,
    });
    expect(login.status).toBe(200);
    expect(login.json).toMatchObject({
      token_type: 'Bearer',
      scope: expect.stringContaining('offline_access') as string,
    });
    const refreshed = await tokenGrant(org, {
      grant_type: 'refresh_token',
      refresh_token: login.json.refresh_token,
    });
    expect(refreshed.status).toBe(200);
    const bearer = `Bearer ${refreshed.json.access_token}`;
    const adminLogin = await tokenGrant('master', {
      grant_type: 'password',
      scope: 'openid',
      username: admin.username,
      password: admin.password,
    });
    expect(adminLogin.status).toBe(200);

    // 4.2-4.4, each with Basic and with Bearer.
    for (const authorization of [basicAuth(admin), `Bearer ${adminLogin.json.access_token}`]) {
      const organizations = await apiCall<unknown[]>('/api/platform/organizations', authorization);
      expect(organizations.status).toBe(200);
      expect(organizations.json.data).toContainEqual(expect.objectContaining({ id: org }));
    }
    for (const authorization of [basicAuth(user), bearer]) {
      const workspaces = await apiCall<{ id: string }[]>(workspacesPath, authorization);
      expect(workspaces.status).toBe(200);
      expect(workspaces.json.data.map((w) => w.id)).toEqual([DEMO.workspace]);
      const operations = await apiCall<unknown[]>(operationsPath, authorization);
      expect(operations.status).toBe(200);
      expect(operations.json.data).toHaveLength(3);
    }

    // 4.5 and 4.6: the user's refresh tokens, then all of them revoked.
    const listed = await apiCall<unknown[]>(tokensPath, bearer);
    expect(listed.status).toBe(200);
    expect(listed.json.data.length).toBeGreaterThanOrEqual(1);
    const revoked = await apiCall(tokensPath, basicAuth(user), { method: 'DELETE' });
    expect(revoked.status).toBe(200);
    expect(revoked.json.data).toBeNull();
    expect((await apiCall(tokensPath, basicAuth(user))).json.data).toEqual([]);
    const again = await tokenGrant(org, {
      grant_type: 'refresh_token',
      refresh_token: login.json.refresh_token,
    });
    expect(again.status).toBe(400);
    expect(again.json.error).toBe('invalid_grant');
  }, 120_000);

  it("opens Keycloak's console at the admin address in Chromium, as the welcome text says", async () => {
    let browser: Browser | undefined;
    const page = await (browser = await launchChromium()).newPage();
    // The console's scripts, styles and images the browser was refused (each one Keycloak
    // would not serve gzipped stopped the console before its login form).
    const refused: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400 && response.url().includes('/auth/resources/')) {
        refused.push(`${response.status()} ${response.url()}`);
      }
    });
    try {
      page.setDefaultTimeout(60_000);
      await page.goto(welcome.consoleUrl, { waitUntil: 'domcontentloaded' });
      await signIn(page, welcome.consoleUser, welcome.consolePassword);
      await page.waitForSelector('[data-testid="rs-sessions-tab"]');
      expect(page.url()).toBe(`${ADMIN_URL}/auth/admin/master/console/#/master/realm-settings`);
      expect(refused).toEqual([]);
    } catch (err) {
      console.error(
        `console screenshot: ${await screenshot(page, 'compose-console').catch(String)}; refused: ${refused.join(', ') || 'nothing'}`,
      );
      throw err;
    } finally {
      await browser.close();
    }
  }, 120_000);
});
