import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { LocalKeycloak } from '../../keycloak/launcher.ts';
import { readinessAnswer } from '../../src/api/openapi.ts';
import { backchannelLogoutUrlOf } from '../../src/auth-proxy/backchannel-logout.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { startGateway, type Gateway } from '../../src/gateway.ts';
import { createLogger } from '../../src/http/logger.ts';
import { loginAsBootstrapAdmin } from '../../src/keycloak/admin-client.ts';
import { startConfiguredKeycloak } from '../../src/keycloak/local-keycloak.ts';
import { ensureUser } from '../../src/demo/ensure-user.ts';
import { testEnv } from '../helpers/test-env.ts';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A Keycloak and a gateway of this suite's own, so that stopping Keycloak disturbs no one else. */
describe('readiness follows Keycloak', () => {
  let config: Config;
  let keycloak: LocalKeycloak | undefined;
  let gateway: Gateway;
  const logger = createLogger('silent');

  beforeAll(async () => {
    const dataDir = path.resolve('.data/test/readiness');
    await rm(dataDir, { recursive: true, force: true });
    config = loadConfig({
      HOST: '127.0.0.1',
      PORT: '18100',
      ADMIN_PORT: '18101',
      PUBLIC_URL: 'http://127.0.0.1:18100',
      ADMIN_PUBLIC_URL: 'http://127.0.0.1:18101',
      KEYCLOAK_HTTP_PORT: '18180',
      KEYCLOAK_MANAGEMENT_PORT: '21080',
      KEYCLOAK_ADMIN_PASSWORD: randomBytes(18).toString('base64url'),
      KEYCLOAK_CLIENT_SECRET: randomBytes(18).toString('base64url'),
      // Generous: key-set fetches and probes of this file's freshly started JVM on a loaded
      // machine, readyz straight after the restart included. The outage below is a closed port,
      // refused at once whatever the bound.
      KEYCLOAK_TIMEOUT_MS: '10000',
      BASIC_CACHE_MAX_SECONDS: '300',
      DATABASE_URL: testEnv().databaseUrl,
      REDIS_URL: testEnv().redisUrl,
      DATA_DIR: dataDir,
    });
    keycloak = await startConfiguredKeycloak(config, () => undefined);
    gateway = await startGateway(config, keycloak.url, logger);
    const admin = await loginAsBootstrapAdmin({
      keycloakUrl: keycloak.url,
      username: config.KEYCLOAK_ADMIN_USERNAME,
      password: config.KEYCLOAK_ADMIN_PASSWORD!,
      timeoutMs: 5000,
    });
    for (const username of ['early', 'late']) {
      await ensureUser(admin, { realm: 'master', username, password: PASSWORD });
    }
    await warmUp(keycloak.url);
    // The start-up pass that points the realms at the back-channel logout URL runs in the
    // background; an outage before it is through leaves it degraded too (rightly, but that is
    // not what this suite looks at). A pass that failed is tried again a minute later.
    await vi.waitFor(
      async () => {
        const res = await fetch(`${config.ADMIN_PUBLIC_URL}/readyz`);
        const { data } = (await res.json()) as { data: Record<string, unknown> };
        expect(data.backchannel_logout).toEqual({
          status: 'up',
          url: backchannelLogoutUrlOf(config),
        });
      },
      { timeout: 150_000, interval: 200 },
    );
  });

  const PASSWORD = 'outage-test-password';

  /**
   * The first password grant of a Keycloak just started (cold JVM, first password hash) can take
   * long on a busy machine. One login straight to Keycloak, which the gateway does not see, warms
   * it up.
   */
  async function warmUp(keycloakUrl: string): Promise<void> {
    const res = await fetch(`${keycloakUrl}/realms/master/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({
        client_id: '_platform-api',
        grant_type: 'password',
        username: 'late',
        password: PASSWORD,
      }),
      signal: AbortSignal.timeout(30_000),
    });
    expect(res.status).toBe(200);
  }
  const basic = (username: string) =>
    `Basic ${Buffer.from(`${username}:${PASSWORD}`).toString('base64')}`;
  async function organizations(authorization: string) {
    const res = await fetch(`${config.PUBLIC_URL}/api/platform/organizations`, {
      headers: { authorization },
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      headers: res.headers,
    };
  }

  afterAll(async () => {
    await gateway?.close();
    await keycloak?.stop();
  });

  async function readyz() {
    const res = await fetch(`${config.PUBLIC_URL}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  // Its time includes a Keycloak stopped and started again (a cold JVM, as `beforeAll`'s, which
  // has the hook timeout) and that JVM's first grant: on a loaded machine more than the 60 s a
  // test has by default.
  it('is ready while Keycloak runs, ready but degraded when it stops (serving what it verified), fully ready when it is back', async () => {
    expect((await readyz()).status).toBe(200);
    // Before the outage: one Basic login (cached) and one Bearer token (verified, cached).
    expect((await organizations(basic('early'))).status).toBe(200);
    const tokenResponse = await fetch(
      `${config.PUBLIC_URL}/auth/realms/master/protocol/openid-connect/token`,
      {
        method: 'POST',
        body: new URLSearchParams({
          client_id: '_platform-api',
          grant_type: 'password',
          username: 'early',
          password: PASSWORD,
        }),
      },
    );
    const { access_token: accessToken } = (await tokenResponse.json()) as { access_token: string };
    expect((await organizations(`Bearer ${accessToken}`)).status).toBe(200);

    const pid = keycloak!.pid;
    await keycloak!.stop();
    keycloak = undefined;
    expect(isAlive(pid)).toBe(false);

    // The load balancer keeps this replica: it still serves verified tokens and cached logins.
    const down = await readyz();
    expect(down.status).toBe(200);
    expect(down.body).toMatchObject({
      data: { keycloak: 'down', database: 'up', cache: 'up' },
      result: '000-00000',
      message: 'Degraded: keycloak.',
    });
    // As the API description documents it.
    expect(readinessAnswer.safeParse(down.body).error?.issues ?? []).toEqual([]);

    // The token endpoint says "retry later" in the envelope rather than failing obscurely.
    const token = await fetch(
      `${config.PUBLIC_URL}/auth/realms/master/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'client_id=_platform-api&grant_type=password&username=a&password=b',
      },
    );
    expect(token.status).toBe(503);
    expect(token.headers.get('retry-after')).toBe('5');
    expect(await token.json()).toMatchObject({ data: null, result: '503-11001' });

    // What was verified before keeps working; a login that needs Keycloak says "retry later".
    expect((await organizations(basic('early'))).status).toBe(200);
    expect((await organizations(`Bearer ${accessToken}`)).status).toBe(200);
    // Answered, not hung (a hang fails the test by its timeout); how fast is not timed here.
    const newLogin = await organizations(basic('late'));
    expect(newLogin.status).toBe(503);
    expect(newLogin.headers.get('retry-after')).toBe('5');
    expect(newLogin.body).toMatchObject({ data: null, result: '503-11001' });

    keycloak = await startConfiguredKeycloak(config, () => undefined);
    expect(await readyz()).toMatchObject({
      status: 200,
      body: { data: { keycloak: 'up' }, message: 'SUCCESS' },
    });
    await warmUp(keycloak.url);
    expect((await organizations(basic('late'))).status).toBe(200);
  }, 240_000);

  it('a replica that has not reached Keycloak once since it started is not ready: it can verify no token', async () => {
    const unreached = await startGateway(
      loadConfig({
        HOST: '127.0.0.1',
        PORT: '18102',
        ADMIN_PORT: '18103',
        PUBLIC_URL: 'http://127.0.0.1:18102',
        // Nothing listens on port 9: every probe is refused.
        KEYCLOAK_URL: 'http://127.0.0.1:9/auth',
        KEYCLOAK_ADMIN_PASSWORD: randomBytes(18).toString('base64url'),
        KEYCLOAK_CLIENT_SECRET: randomBytes(18).toString('base64url'),
        DATABASE_URL: testEnv().databaseUrl,
        REDIS_URL: testEnv().redisUrl,
        DATA_DIR: path.resolve('.data/test/readiness-unreached'),
      }),
      'http://127.0.0.1:9/auth',
      logger,
    );
    try {
      const res = await fetch('http://127.0.0.1:18102/readyz');
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(await res.json()).toMatchObject({
        data: { keycloak: 'down', database: 'up' },
        result: '503-00001',
        message: 'Not ready: Keycloak has not answered since this replica started.',
      });
    } finally {
      await unreached.close();
    }
  });
});
