import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { seconds, timeUntil } from '../ha/measure.ts';
import {
  backInRotation,
  balancerLog as stackBalancerLog,
  balancerServes,
  loadFigures,
  newSecret,
  productionFixture,
  steadyLoad,
  warmRequests as organizationWarmRequests,
} from './production-load.ts';
import { type ComposeStack } from './stack.ts';
import { apiCall, printFigures, tokenGrant } from './walk.ts';

/*
 * The production profile (docs/production-topology.md) under a steady load through HAProxy on
 * port 8000, the route production traffic takes (forwarded to an automation service: a
 * recording upstream on this machine): one replica recreated at another address, one gateway
 * container stopped, one Keycloak container killed, then the whole stack taken down and started
 * again on its volumes. Organizations and users are made through the platform API, as an
 * administrator would.
 */

const run = promisify(execFile);
const fixture = productionFixture('compose', 3);
const { org, users, forwardedPath } = fixture;
/** A user who logs in for the first time after a Keycloak node rejoined. */
const newcomer = { username: 'newcomer', password: newSecret() };

let stack: ComposeStack;
/** An offline session made before the restart of the whole stack. */
let offlineRefreshToken: string;

/** The bootstrap administrator's Bearer token. */
const adminBearer = () => fixture.adminBearer();

async function passwordGrant(user: { username: string; password: string }, scope = 'openid') {
  return tokenGrant(org, { grant_type: 'password', scope, ...user });
}

/** Each user's Bearer token and Basic login on the forwarded route, each used a few times. */
const warmRequests = (bearerOnly = false) =>
  organizationWarmRequests(org, forwardedPath, users, bearerOnly);

/** HAProxy's log so far; the figures of what it logs after `offset`. */
const balancerLog = (offset = 0) => stackBalancerLog(stack, offset);

/** A container's `docker inspect` field (Go template). */
async function inspect(id: string, format: string): Promise<string> {
  return (await run('docker', ['inspect', '--format', format, id])).stdout.trim();
}
const ADDRESS = '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}';

/** Waits until Docker calls a service's container healthy; the seconds since `since`. */
async function healthy(service: string, since: number): Promise<number> {
  const health = async () =>
    (await stack.compose('ps', '--format', '{{.Health}}', service).catch(() => '')).trim();
  await expect.poll(health, { timeout: 300_000, interval: 1000 }).toBe('healthy');
  return (performance.now() - since) / 1000;
}

describe('the production profile: docker compose --profile production up load-balancer', () => {
  beforeAll(async () => {
    stack = await fixture.startStack();
    const rotation = await balancerServes();
    await fixture.makeOrganization('Compose suite', [newcomer]);
    printFigures('production profile up', {
      'up (build from cache, both Keycloak nodes, both gateways, HAProxy)': `${stack.upSeconds.toFixed(1)} s`,
      'then until HAProxy had a replica in rotation on both listeners': `${rotation.toFixed(1)} s`,
    });
  }, 900_000);

  it('forwards to the automation service with the identity headers', async () => {
    const upstream = fixture.upstream();
    upstream.seen.length = 0;
    const answer = await apiCall(forwardedPath, basicAuth(users[0]!));
    expect(answer.status).toBe(200);
    expect(answer.json.data).toEqual({ from: 'upstream' });
    expect(upstream.seen).toHaveLength(1);
    expect(upstream.seen[0]!.url).toBe(forwardedPath);
    expect(upstream.seen[0]!.headers).toMatchObject({ organization_id: org });
    expect(upstream.seen[0]!.headers.authorization).toBeUndefined();
  });

  it('shows no secret in docker inspect of any container: each reads them from files', async () => {
    const ids = (await stack.compose('ps', '-aq')).split('\n').filter(Boolean);
    const shown = (await run('docker', ['inspect', ...ids], { maxBuffer: 64 * 1024 * 1024 }))
      .stdout;
    const services = (JSON.parse(shown) as { Config: { Labels: Record<string, string> } }[]).map(
      (c) => c.Config.Labels['com.docker.compose.service'],
    );
    expect(services.sort()).toEqual([
      'gateway-1',
      'gateway-2',
      'keycloak-1',
      'keycloak-2',
      'load-balancer',
      'postgres',
      'redis',
    ]);
    // The variables name the files ...
    expect(shown).toContain('DATABASE_URL_FILE=/run/database/url');
    expect(shown).toContain('POSTGRES_PASSWORD_FILE=/run/database/password');
    // ... which hold the values the stack runs on (no value of a variable, Cmd, label or mount).
    for (const [name, value] of Object.entries(fixture.secrets))
      expect(shown, name).not.toContain(value);
    const held = await stack.compose('exec', '-T', 'gateway-1', 'cat', '/run/database/url');
    expect(held).toContain(`:${fixture.secrets.POSTGRES_PASSWORD}@postgres:5432/`);
  });

  it('a replica recreated at another address is found by HAProxy (resolvers) and serves', async () => {
    // gateway-1 removed, its address taken by another container meanwhile (so Docker gives the
    // new gateway-1 another one), then recreated as `up` does: HAProxy, which resolved the name
    // at start, must resolve it again to find the replica.
    const before = await inspect(await stack.containerId('gateway-1'), ADDRESS);
    const offset = (await balancerLog()).length;
    const since = performance.now();
    await stack.compose('rm', '--stop', '--force', 'gateway-1');
    const image = await inspect(await stack.containerId('redis'), '{{.Config.Image}}');
    const squatter = (
      await run('docker', [
        ...['run', '-d', '--rm', '--entrypoint', 'sleep'],
        // The project's label: `down` removes it with the stack if this phase fails.
        ...['--label', `com.docker.compose.project=${stack.project}`],
        ...['--network', `${stack.project}_default`, '--ip', before, image, '600'],
      ])
    ).stdout.trim();
    try {
      await stack.compose('up', '-d', '--no-deps', 'gateway-1');
      const after = await inspect(await stack.containerId('gateway-1'), ADDRESS);
      const back = await backInRotation(stack, 'gateway-1', offset, since);
      const answers: number[] = [];
      for (let i = 0; i < 6; i++)
        answers.push((await apiCall(forwardedPath, basicAuth(users[0]!))).status);
      const log = await stack.logs('load-balancer');
      const moved = /gateways-public\/gateway-1 changed its IP from \S+ to \S+[^\n]*/.exec(
        log.slice(offset),
      );
      const served = (await balancerLog(offset)).served;
      printFigures('gateway-1 recreated at another address', {
        'address before / after': `${before} / ${after}`,
        "HAProxy's log": moved?.[0] ?? 'no address change logged',
        'back in rotation on both listeners after its removal': `${back.toFixed(1)} s`,
        'answers after (6 requests)': answers.join(', '),
        'answered by gateway-1 / gateway-2 since the removal': `${served['gateway-1'] ?? 0} / ${served['gateway-2'] ?? 0}`,
      });
      expect(after).not.toBe(before);
      expect(answers).toEqual(answers.map(() => 200));
      expect(served['gateway-1']).toBeGreaterThan(0);
    } finally {
      await run('docker', ['rm', '-f', squatter]);
    }
  }, 240_000);

  it('one gateway container stopped under load: no failed request', async () => {
    const requests = await warmRequests();
    const before = await balancerLog();
    const load = steadyLoad(requests, 20);
    await new Promise((resolve) => setTimeout(resolve, 4000)); // the load is under way
    const stopStarted = performance.now();
    await stack.compose('stop', 'gateway-1');
    const stopSeconds = (performance.now() - stopStarted) / 1000;
    const result = await load;
    const after = await balancerLog(before.length);
    const restarted = performance.now();
    await stack.compose('start', 'gateway-1');
    const backSeconds = await healthy('gateway-1', restarted);
    printFigures('one gateway container stopped (docker compose stop gateway-1)', {
      ...loadFigures(result, after.served),
      'replicas HAProxy took out of rotation': after.stateChanges.join('; ') || 'none',
      'docker compose stop took': `${stopSeconds.toFixed(1)} s`,
      'gateway-1 healthy again after start': `${backSeconds.toFixed(1)} s`,
    });
    expect(result.bad).toBe(0);
    expect(result.ok).toBeGreaterThan(0);
    expect(after.served['gateway-2']).toBeGreaterThan(0);
  }, 240_000);

  it('one Keycloak container killed under load: no failed Bearer request, logins back after it rejoins', async () => {
    const requests = await warmRequests(true);
    const load = steadyLoad(requests, 20);
    await new Promise((resolve) => setTimeout(resolve, 4000)); // the load is under way
    await stack.compose('kill', 'keycloak-1');
    const killedAt = performance.now();
    // A new login while node 1 is gone: the gateways take it to node 2.
    const loginDuringOutage = await timeUntil(
      killedAt,
      async () => (await passwordGrant(users[1]!)).status,
      (status) => status === 200,
      30_000,
    );
    const result = await load;
    const restarted = performance.now();
    await stack.compose('start', 'keycloak-1');
    const rejoinSeconds = await healthy('keycloak-1', restarted);
    // Logins after it rejoined, through HAProxy: a password grant, and the first Basic login
    // of a user who has never logged in.
    const passwordLogin = await passwordGrant(users[2]!);
    const basicLogin = await apiCall(forwardedPath, basicAuth(newcomer));
    printFigures('one Keycloak container killed (docker compose kill keycloak-1)', {
      ...loadFigures(result),
      'first password grant after the kill': `${seconds(loginDuringOutage.ms)} (${loginDuringOutage.tries} tries)`,
      'keycloak-1 healthy again after start (rejoined)': `${rejoinSeconds.toFixed(1)} s`,
      'after the rejoin: password grant / new Basic login': `${passwordLogin.status} / ${basicLogin.status}`,
    });
    expect(result.bad).toBe(0);
    expect(result.ok).toBeGreaterThan(0);
    expect(loginDuringOutage.ms).toBeDefined();
    expect(passwordLogin.status).toBe(200);
    expect(basicLogin.status).toBe(200);
  }, 480_000);

  it('the whole stack down and up again: organizations, users and refresh tokens are still there', async () => {
    const offline = await passwordGrant(users[1]!, 'openid offline_access');
    expect(offline.status).toBe(200);
    offlineRefreshToken = offline.json.refresh_token;
    const downStarted = performance.now();
    // Containers and network removed, volumes kept: what a host's reboot or an upgrade does.
    await stack.compose('down', '--timeout', '20');
    const downSeconds = (performance.now() - downStarted) / 1000;
    const upSeconds = await stack.upAgain();
    const rotation = await balancerServes();

    const organizations = await apiCall<unknown[]>(
      '/api/platform/organizations',
      await adminBearer(),
    );
    expect(organizations.status).toBe(200);
    expect(organizations.json.data).toContainEqual(expect.objectContaining({ id: org }));
    const logins = await Promise.all(users.map((user) => apiCall(forwardedPath, basicAuth(user))));
    const renewed = await tokenGrant(org, {
      grant_type: 'refresh_token',
      refresh_token: offlineRefreshToken,
    });
    const listed = await apiCall<unknown[]>(
      `/api/${org}/platform/users/_current/refresh_tokens`,
      basicAuth(users[1]!),
    );
    printFigures('the whole stack down and up again (volumes kept)', {
      'docker compose down took': `${downSeconds.toFixed(1)} s`,
      'up again until every service was ready': `${upSeconds.toFixed(1)} s`,
      'then until HAProxy had a replica in rotation on both listeners': `${rotation.toFixed(1)} s`,
      'Basic logins of the users made before': logins.map((l) => l.status).join(', '),
      'refresh grant of an offline token from before': renewed.status,
      'refresh tokens listed for its user': listed.json.data.length,
    });
    expect(logins.map((l) => l.status)).toEqual(users.map(() => 200));
    expect(renewed.status).toBe(200);
    expect(listed.status).toBe(200);
    expect(listed.json.data.length).toBeGreaterThanOrEqual(1);
  }, 900_000);
});
