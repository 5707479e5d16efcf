import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runLoad, type LoadRequest, type LoadResult } from '../../bench/load.ts';
import { basicAuth } from '../helpers/api.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { haproxyLogFigures } from '../ha/haproxy.ts';
import { LOAD, seconds, timeUntil } from '../ha/measure.ts';
import {
  ADMIN_URL,
  HOST_ON_STACK_NETWORK,
  PUBLIC_URL,
  startComposeStack,
  type ComposeStack,
} from './stack.ts';
import { apiCall, printFigures, tokenGrant } from './walk.ts';

/*
 * The production profile (docs/production-topology.md) under a steady load through HAProxy on
 * port 8000, the route production traffic takes (forwarded to an automation service: a
 * recording upstream on this machine): one gateway container stopped, one Keycloak container
 * killed, then the whole stack taken down and started again on its volumes. Organizations and
 * users are made through the platform API, as an administrator would.
 */

const org = `compose-${randomBytes(3).toString('hex')}`;
const WORKSPACE = 'ws1';
const secret = () => randomBytes(24).toString('base64url');
const secrets = {
  KEYCLOAK_ADMIN_PASSWORD: secret(),
  KEYCLOAK_CLIENT_SECRET: secret(),
  REALMGATE_CACHE_SECRET: secret(),
};
const users = ['load-0', 'load-1', 'load-2'].map((username) => ({
  username,
  password: secret(),
}));
/** A user who logs in for the first time after a Keycloak node rejoined. */
const newcomer = { username: 'newcomer', password: secret() };
const forwardedPath = `/api/${org}/workspaces/${WORKSPACE}/ita/operations`;

let stack: ComposeStack;
let upstream: RecordingUpstream;
/** An offline session made before the restart of the whole stack. */
let offlineRefreshToken: string;

/** The bootstrap administrator's Bearer token: it logs in on the admin listener only. */
async function adminBearer(): Promise<string> {
  const grant = await tokenGrant(
    'master',
    {
      grant_type: 'password',
      scope: 'openid',
      username: 'admin',
      password: secrets.KEYCLOAK_ADMIN_PASSWORD,
    },
    ADMIN_URL,
  );
  expect(grant.status, JSON.stringify(grant.json)).toBe(200);
  return `Bearer ${grant.json.access_token}`;
}

async function passwordGrant(user: { username: string; password: string }, scope = 'openid') {
  return tokenGrant(org, { grant_type: 'password', scope, ...user });
}

/** Each user's Bearer token and Basic login on the forwarded route, each used a few times. */
async function warmRequests(bearerOnly = false): Promise<LoadRequest[]> {
  const requests: LoadRequest[] = [];
  for (const user of users) {
    const grant = await passwordGrant(user);
    expect(grant.status).toBe(200);
    requests.push({ path: forwardedPath, authorization: `Bearer ${grant.json.access_token}` });
    if (!bearerOnly) requests.push({ path: forwardedPath, authorization: basicAuth(user) });
  }
  // Round robin: four rounds reach both replicas (and their workers) with each credential.
  for (let round = 0; round < 4; round++) {
    for (const request of requests) {
      expect((await apiCall(request.path, request.authorization!)).status).toBe(200);
    }
  }
  return requests;
}

/** HAProxy's log so far; the figures of what it logs after `offset`. */
async function balancerLog(offset = 0) {
  const text = await stack.logs('load-balancer');
  return { length: text.length, ...haproxyLogFigures(text.slice(offset)) };
}

/** The steady load, from a load generator process of its own (bench/load.ts). */
function steadyLoad(requests: LoadRequest[], durationSeconds: number): Promise<LoadResult> {
  return runLoad({
    url: PUBLIC_URL,
    connections: LOAD.connections,
    durationSeconds,
    overallRate: LOAD.rate,
    requests,
  });
}

/** The load's figures; with `served`, how many answers each replica gave (where counted). */
function loadFigures(result: LoadResult, served?: Record<string, number>): Record<string, string> {
  const load = `${result.ok + result.bad} requests, ${result.bad} failed, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, statuses ${JSON.stringify(result.statusCodes)}`;
  if (!served) return { 'load through HAProxy': load };
  return {
    'load through HAProxy': load,
    'answered by gateway-1 / gateway-2': `${served['gateway-1'] ?? 0} / ${served['gateway-2'] ?? 0}`,
  };
}

/**
 * Waits until HAProxy has a replica in rotation on both listeners (its `/readyz` checks passed
 * twice): Docker calls the containers healthy seconds before that, and until then HAProxy
 * answers with its own 503 page. The seconds it took.
 */
async function balancerServes(): Promise<number> {
  const since = performance.now();
  const status = async (base: string) =>
    (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined))
      ?.status;
  for (const base of [PUBLIC_URL, ADMIN_URL]) {
    // vi.waitFor, not expect.poll: this also runs in beforeAll, where expect.poll cannot.
    await vi.waitFor(async () => expect(await status(base)).toBe(200), {
      timeout: 120_000,
      interval: 500,
    });
  }
  return (performance.now() - since) / 1000;
}

/** Waits until Docker calls a service's container healthy; the seconds since `since`. */
async function healthy(service: string, since: number): Promise<number> {
  const health = async () =>
    (await stack.compose('ps', '--format', '{{.Health}}', service).catch(() => '')).trim();
  await expect.poll(health, { timeout: 300_000, interval: 1000 }).toBe('healthy');
  return (performance.now() - since) / 1000;
}

describe('the production profile: docker compose --profile production up load-balancer', () => {
  beforeAll(async () => {
    upstream = await startRecordingUpstream('0.0.0.0');
    stack = await startComposeStack({
      profile: 'production',
      services: ['load-balancer'],
      environment: {
        ...secrets,
        AUTOMATION_UPSTREAM_URL: `http://${HOST_ON_STACK_NETWORK}:${new URL(upstream.url).port}`,
      },
    });
    const rotation = await balancerServes();
    const admin = await adminBearer();
    const made = [
      await apiCall('/api/platform/organizations', admin, {
        method: 'POST',
        body: { id: org, name: 'Compose suite' },
      }),
      await apiCall(`/api/platform/organizations/${org}/workspaces`, admin, {
        method: 'POST',
        body: { id: WORKSPACE, name: 'Compose workspace' },
      }),
      ...(await Promise.all(
        [...users, newcomer].map((user) =>
          apiCall(`/api/platform/organizations/${org}/users`, admin, {
            method: 'POST',
            body: { ...user, workspaces: [WORKSPACE] },
          }),
        ),
      )),
    ];
    expect(made.map((answer) => answer.status)).toEqual(made.map(() => 200));
    printFigures('production profile up', {
      'up (build from cache, both Keycloak nodes, both gateways, HAProxy)': `${stack.upSeconds.toFixed(1)} s`,
      'then until HAProxy had a replica in rotation on both listeners': `${rotation.toFixed(1)} s`,
    });
  }, 900_000);

  afterAll(async () => {
    await stack?.down();
    await upstream?.close();
  }, 180_000);

  it('forwards to the automation service with the identity headers', async () => {
    upstream.seen.length = 0;
    const answer = await apiCall(forwardedPath, basicAuth(users[0]!));
    expect(answer.status).toBe(200);
    expect(answer.json.data).toEqual({ from: 'upstream' });
    expect(upstream.seen).toHaveLength(1);
    expect(upstream.seen[0]!.url).toBe(forwardedPath);
    expect(upstream.seen[0]!.headers).toMatchObject({ organization_id: org });
    expect(upstream.seen[0]!.headers.authorization).toBeUndefined();
  });

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
