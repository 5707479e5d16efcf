import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { runLoad, type LoadRequest, type LoadResult } from '../../bench/load.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import {
  adminBearer,
  balancerServes,
  loadFigures,
  makeOrganization,
  newSecret,
  steadyLoad,
  warmRequests,
} from '../compose/production-load.ts';
import { ADMIN_URL, PUBLIC_URL } from '../compose/stack.ts';
import { apiCall, printFigures, tokenGrant } from '../compose/walk.ts';
import { basicAuth } from '../helpers/api.ts';
import { LOAD, timeUntil, type Attempts } from '../ha/measure.ts';
import { dpopKey, dpopProof, type DpopKey } from '../helpers/dpop.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import {
  databaseUrl,
  redisUrl,
  deploy,
  docker,
  gatewayUpdate,
  HOSTS,
  hostOfAddress,
  hosts,
  label,
  MACHINE,
  nodeStatus,
  placed,
  pushImages,
  ready,
  replicaUrl,
  runningOn,
  serviceLogs,
  setAvailability,
  showStack,
  STACK,
  updateGateway,
  type Host,
  type StackImages,
  type SwarmSecrets,
} from './swarm.ts';

/*
 * The production topology on three hosts (ops/swarm/stack.yml on a three-node swarm,
 * test/swarm/hosts.sh), under a steady load through HAProxy on host 1: replicas on every host
 * serve; what ends access on one host ends it on the others; a host drained, a host lost (its
 * link cut) and a rolling update of the gateway. Host 1 holds PostgreSQL, Redis and HAProxy;
 * Keycloak's nodes start on hosts 2 and 3. Each phase prints its figures (docs/production-topology.md).
 */

const org = `swarm-${randomBytes(3).toString('hex')}`;
const workspace = 'ws1';
const forwardedPath = `/api/${org}/workspaces/${workspace}/ita/operations`;
const secrets: SwarmSecrets = {
  KEYCLOAK_ADMIN_PASSWORD: newSecret(),
  KEYCLOAK_CLIENT_SECRET: newSecret(),
  REALMGATE_CACHE_SECRET: newSecret(),
  POSTGRES_PASSWORD: newSecret(),
  REDIS_PASSWORD: newSecret(),
};
const users = Array.from({ length: 3 }, (_, i) => ({
  username: `load-${i}`,
  password: newSecret(),
}));
/** Users whose access a phase ends, one each. */
const victims = Array.from({ length: 3 }, (_, i) => ({
  username: `victim-${i}`,
  password: newSecret(),
}));

let upstream: RecordingUpstream;
let images: StackImages;

/** Requests the upstream saw since `offset`, by the host of the replica that forwarded them. */
function servedByHost(offset: number): Record<Host, number> {
  const counts: Record<Host, number> = { 1: 0, 2: 0, 3: 0 };
  for (const seen of upstream.seen.slice(offset)) {
    const host = hostOfAddress(seen.remoteAddress);
    if (host) counts[host]++;
  }
  return counts;
}
const servedFigure = (served: Record<Host, number>) => `${served[1]} / ${served[2]} / ${served[3]}`;

/** The status of a GET of the forwarded route straight at `host`'s replica. */
async function statusOn(host: Host, authorization: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${replicaUrl(host)}${forwardedPath}`, {
    headers: { authorization, ...headers },
    signal: AbortSignal.timeout(10_000),
  });
  await res.arrayBuffer();
  return res.status;
}

/** A form POST to the realm's OpenID endpoint `name` through `host`'s replica. */
async function oidcPost(host: Host, name: string, form: Record<string, string>, dpop?: string) {
  const res = await fetch(
    `${replicaUrl(host)}/auth/realms/${org}/protocol/openid-connect/${name}`,
    {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        ...(dpop ? { dpop } : {}),
      },
      body: new URLSearchParams({ client_id: apiClientIdOf(org), ...form }),
      signal: AbortSignal.timeout(30_000),
    },
  );
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Record<string, string> };
}

/** A fresh session of `user`: its tokens, served on every host's replica. */
async function session(user: { username: string; password: string }) {
  const grant = await tokenGrant(org, { grant_type: 'password', scope: 'openid', ...user });
  expect(grant.status).toBe(200);
  const bearer = `Bearer ${grant.json.access_token}`;
  for (const host of HOSTS) expect(await statusOn(host, bearer)).toBe(200);
  return { bearer, refreshToken: grant.json.refresh_token, accessToken: grant.json.access_token };
}

/** From `since`, how long until each of `hostsToAsk` refuses `bearer` (401). */
async function refusedOn(hostsToAsk: Host[], since: number, bearer: string) {
  const attempts: Attempts[] = await Promise.all(
    hostsToAsk.map((host) =>
      timeUntil(
        since,
        () => statusOn(host, bearer),
        (s) => s === 401,
      ),
    ),
  );
  return Object.fromEntries(hostsToAsk.map((host, i) => [host, attempts[i]!])) as Record<
    Host,
    Attempts
  >;
}
const refusalFigure = (refused: Record<number, Attempts>) =>
  Object.entries(refused)
    .map(([host, a]) => `host ${host} after ${a.ms ?? 'never'} ms`)
    .join(', ');

/** A DPoP-bound access token of `user` (a password grant with a proof of a new key), and the key. */
async function dpopGrant(user: { username: string; password: string }) {
  const key = await dpopKey();
  const tokenUrl = `${PUBLIC_URL}/auth/realms/${org}/protocol/openid-connect/token`;
  const grant = await oidcPost(
    1,
    'token',
    { grant_type: 'password', scope: 'openid', ...user },
    await dpopProof(key, { method: 'POST', url: tokenUrl }),
  );
  expect(grant.status, JSON.stringify(grant.json)).toBe(200);
  expect(grant.json.token_type).toBe('DPoP');
  return { key, token: grant.json.access_token! };
}

/**
 * The steady load until `stop()` (at most `seconds`), Bearer and Basic requests from two load
 * generators (half the rate each), so that each kind's figures show.
 */
function loadUntilStopped(requests: LoadRequest[], seconds: number) {
  const stop = new AbortController();
  const kind = (prefix: string) =>
    runLoad(
      {
        url: PUBLIC_URL,
        connections: LOAD.connections / 2,
        durationSeconds: seconds,
        overallRate: LOAD.rate / 2,
        requests: requests.filter((r) => r.authorization?.startsWith(prefix)),
      },
      undefined,
      stop.signal,
    );
  const loads = Promise.all([kind('Bearer '), kind('Basic ')]);
  return {
    stop: () => stop.abort(),
    result: loads.then(([bearer, basic]) => ({ bearer, basic })),
  };
}

/** Both kinds' figures, and the sum of their failures. */
function kindFigures(loads: { bearer: LoadResult; basic: LoadResult }) {
  const line = (r: LoadResult) =>
    `${r.ok + r.bad} requests, ${r.bad} failed, p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms, statuses ${JSON.stringify(r.statusCodes)}`;
  return {
    'Bearer load through HAProxy': line(loads.bearer),
    'Basic load through HAProxy': line(loads.basic),
  };
}
const failedOf = (loads: { bearer: LoadResult; basic: LoadResult }) =>
  loads.bearer.bad + loads.basic.bad;

/**
 * A DPoP client through HAProxy beside the load: one request every 100 ms, each with a fresh
 * proof, until `stop()`; what it was answered.
 */
function dpopClient(key: DpopKey, token: string) {
  let running = true;
  const statuses: Record<string, number> = {};
  const done = (async () => {
    while (running) {
      const proof = await dpopProof(key, {
        method: 'GET',
        url: `${PUBLIC_URL}${forwardedPath}`,
        accessToken: token,
      });
      const status = await fetch(`${PUBLIC_URL}${forwardedPath}`, {
        headers: { authorization: `DPoP ${token}`, dpop: proof },
        signal: AbortSignal.timeout(20_000),
      })
        .then(async (res) => (await res.arrayBuffer(), String(res.status)))
        .catch(() => 'error');
      statuses[status] = (statuses[status] ?? 0) + 1;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      const sent = Object.values(statuses).reduce((a, b) => a + b, 0);
      return { sent, failed: sent - (statuses['200'] ?? 0), statuses };
    },
  };
}

/** HAProxy's log (the load balancer's) from `offset`: answers by server and status, state changes. */
async function balancerSince(offset: number) {
  const text = (await serviceLogs('load-balancer')).slice(offset);
  const answers: Record<string, number> = {};
  for (const m of text.matchAll(/ gateways-public\/(\S+) \S+ (\d{3}) /g)) {
    answers[`${m[1]} ${m[2]}`] = (answers[`${m[1]} ${m[2]}`] ?? 0) + 1;
  }
  const changes = [...text.matchAll(/Server gateways-public\/\S+ is \w+[^\n]*/g)].map((m) => m[0]);
  return { answers: JSON.stringify(answers), changes: changes.join('; ') || 'none' };
}
const balancerOffset = async () => (await serviceLogs('load-balancer')).length;

/**
 * Waits until HAProxy sends requests to `host`'s replica again (its checks passed, its task's
 * address resolved): a few requests at a time through HAProxy, until the upstream sees one from
 * that host. The seconds since `since`.
 */
async function usedAgain(host: Host, since: number): Promise<number> {
  const authorization = basicAuth(users[0]!);
  await vi.waitFor(
    async () => {
      const offset = upstream.seen.length;
      await Promise.all(Array.from({ length: 6 }, () => apiCall(forwardedPath, authorization)));
      expect(servedByHost(offset)[host]).toBeGreaterThan(0);
    },
    { timeout: 180_000, interval: 500 },
  );
  return (performance.now() - since) / 1000;
}

const untilLoadRuns = () => new Promise((resolve) => setTimeout(resolve, 3000));

describe('the production topology on three hosts: docker stack deploy -c ops/swarm/stack.yml', () => {
  beforeAll(async () => {
    let since = performance.now();
    await hosts('up');
    const hostsSeconds = (performance.now() - since) / 1000;
    since = performance.now();
    images = await pushImages();
    const pushSeconds = (performance.now() - since) / 1000;
    upstream = await startRecordingUpstream(MACHINE);
    since = performance.now();
    await deploy(secrets, {
      ...images.environment,
      PUBLIC_URL,
      ADMIN_PUBLIC_URL: ADMIN_URL,
      AUTOMATION_UPSTREAM_URL: upstream.url,
    });
    const placements = {
      postgres: [1],
      redis: [1],
      'load-balancer': [1],
      'keycloak-1': [2],
      'keycloak-2': [3],
      gateway: [1, 2, 3],
    } as Record<string, Host[]>;
    try {
      for (const [name, where] of Object.entries(placements)) await placed(name, where, since);
      for (const host of HOSTS) await ready(replicaUrl(host));
      await balancerServes();
    } catch (err) {
      await showStack();
      throw err;
    }
    const upSeconds = (performance.now() - since) / 1000;
    // Host 1 is where either Keycloak node goes when its own host is drained or lost.
    await label(1, 'realmgate.keycloak-1=true', 'realmgate.keycloak-2=true');
    // One Keycloak cluster across the hosts: each node saw a view of two members.
    const view = /ISPN000094[^\n]*\(2\)/;
    expect(await serviceLogs('keycloak-1')).toMatch(view);
    expect(await serviceLogs('keycloak-2')).toMatch(view);
    await makeOrganization(
      await adminBearer(secrets.KEYCLOAK_ADMIN_PASSWORD),
      { id: org, name: 'Swarm suite', workspace },
      [...users, ...victims],
    );
    printFigures(
      'three hosts, stack deployed',
      {
        'hosts up (bridge, namespaces, registry, three dockerd, swarm)': `${hostsSeconds.toFixed(1)} s`,
        'images pushed to the registry on the bridge': `${pushSeconds.toFixed(1)} s`,
        'deploy until every task ran where placed, every replica and HAProxy ready': `${upSeconds.toFixed(1)} s`,
      },
      'swarm',
    );
  }, 1_200_000);

  afterEach(async ({ task }) => {
    if (task.result?.state === 'fail') await showStack();
  }, 120_000);

  afterAll(async () => {
    await upstream?.close();
    await hosts('down');
  }, 300_000);

  it('shows no secret in docker service inspect, nor in docker inspect of any task on any host', async () => {
    const services = (await docker(1, 'stack', 'services', '-q', STACK)).split('\n');
    const shown = [await docker(1, 'service', 'inspect', ...services)];
    let containers = 0;
    for (const host of HOSTS) {
      const ids = (await docker(host, 'ps', '-aq')).split('\n').filter(Boolean);
      containers += ids.length;
      shown.push(await docker(host, 'inspect', ...ids));
    }
    // Every task: PostgreSQL, Redis, HAProxy, two Keycloak nodes, a gateway on each host.
    expect(services).toHaveLength(6);
    expect(containers).toBeGreaterThanOrEqual(8);
    const text = shown.join('\n');
    // The tasks hold them as files: the database password is in use (the gateways and Keycloak
    // log in with it), and the gateway's task reads its address from the file.
    expect(text).toContain('DATABASE_URL_FILE=/run/database/url');
    expect(text).toContain('POSTGRES_PASSWORD_FILE=/run/database/password');
    expect(text).toContain('REDIS_URL_FILE=/run/redis/url');
    for (const [name, value] of Object.entries(secrets)) expect(text, name).not.toContain(value);
    expect(text).not.toContain(databaseUrl(secrets.POSTGRES_PASSWORD));
    expect(text).not.toContain(redisUrl(secrets.REDIS_PASSWORD));
    // ... and the stack runs on them: every replica reaches PostgreSQL and Redis with them, and
    // Redis refuses a client without its password.
    for (const host of HOSTS) {
      const answer = await fetch(`${replicaUrl(host)}/readyz`);
      const body = (await answer.json()) as { data: Record<string, string> };
      expect(body.data, `host ${host}`).toMatchObject({ database: 'up', cache: 'up' });
    }
    const label = `label=com.docker.swarm.service.name=${STACK}_redis`;
    const redis = await docker(1, 'ps', '-q', '--filter', label);
    expect(await docker(1, 'exec', redis, 'sh', '-c', 'redis-cli ping 2>&1; true')).toMatch(
      /NOAUTH/,
    );
  });

  it('steady load: answered by the replicas on all three hosts, none failed', async () => {
    const requests = await warmRequests(org, forwardedPath, users);
    const offset = upstream.seen.length;
    const result = await steadyLoad(requests, 15);
    const served = servedByHost(offset);
    printFigures(
      'steady load through HAProxy',
      {
        ...loadFigures(result),
        'answered by the replicas on host 1 / 2 / 3': servedFigure(served),
      },
      'swarm',
    );
    expect(result.bad).toBe(0);
    for (const host of HOSTS) expect(served[host]).toBeGreaterThan(0);
  }, 120_000);

  it('access ended through one host is refused on the others within 1 s (logout, RFC 7009 revocation, back-channel logout, DPoP replay), under load', async () => {
    const requests = await warmRequests(org, forwardedPath, users);
    const load = loadUntilStopped(requests, 120);
    await untilLoadRuns();

    const loggedOut = await session(victims[0]!);
    // Each time from the answer of the call that ended the access: from then on it is ended.
    let called = performance.now();
    const logout = await oidcPost(2, 'logout', { refresh_token: loggedOut.refreshToken });
    expect(logout.status).toBe(204);
    const logoutCall = performance.now() - called;
    const afterLogout = await refusedOn([1, 3], performance.now(), loggedOut.bearer);

    const revoked = await session(victims[1]!);
    called = performance.now();
    expect((await oidcPost(2, 'revoke', { token: revoked.accessToken })).status).toBe(200);
    const revokeCall = performance.now() - called;
    const afterRevocation = await refusedOn([1, 3], performance.now(), revoked.bearer);

    // Ended inside Keycloak (its admin API): Keycloak posts the logout token to HAProxy's admin
    // side, one replica takes it, every replica applies it.
    const ended = await session(victims[2]!);
    const { sid } = decodeJwt(ended.accessToken);
    const admin = await adminBearer(secrets.KEYCLOAK_ADMIN_PASSWORD);
    called = performance.now();
    const deleted = await fetch(`${ADMIN_URL}/auth/admin/realms/${org}/sessions/${String(sid)}`, {
      method: 'DELETE',
      headers: { authorization: admin },
    });
    expect(deleted.status).toBe(204);
    const deleteCall = performance.now() - called;
    const afterBackchannel = await refusedOn([1, 2, 3], performance.now(), ended.bearer);

    // One DPoP proof, used on host 2's replica, then replayed to host 3's.
    const { key, token } = await dpopGrant(users[1]!);
    const proof = await dpopProof(key, {
      method: 'GET',
      url: `${PUBLIC_URL}${forwardedPath}`,
      accessToken: token,
    });
    const first = await statusOn(2, `DPoP ${token}`, { dpop: proof });
    const replayed = await statusOn(3, `DPoP ${token}`, { dpop: proof });

    load.stop();
    const result = await load.result;
    printFigures(
      'access ended through one host, refused on the others',
      {
        ...kindFigures(result),
        'logout through host 2: answered in': `${Math.round(logoutCall)} ms`,
        'logout: from its answer, refused on': refusalFigure(afterLogout),
        'RFC 7009 revocation through host 2: answered in': `${Math.round(revokeCall)} ms`,
        'revocation: from its answer, refused on': refusalFigure(afterRevocation),
        "session ended in Keycloak's admin API: answered in": `${Math.round(deleteCall)} ms`,
        'back-channel logout: from that answer, refused on': refusalFigure(afterBackchannel),
        'DPoP proof on host 2 / replayed on host 3': `${first} / ${replayed}`,
      },
      'swarm',
    );
    expect(failedOf(result)).toBe(0);
    for (const refused of [afterLogout, afterRevocation, afterBackchannel]) {
      for (const attempts of Object.values(refused)) expect(attempts.ms).toBeLessThanOrEqual(1000);
    }
    expect(first).toBe(200);
    expect(replayed).toBe(401);
  }, 240_000);

  it('host 2 drained under load: its tasks move, no request failed; active again, it serves', async () => {
    const requests = await warmRequests(org, forwardedPath, users);
    const logOffset = await balancerOffset();
    const load = loadUntilStopped(requests, 600);
    await untilLoadRuns();
    const drainedAt = performance.now();
    await setAvailability(2, 'drain');
    const gatewayGone = await placed('gateway', [1, 3], drainedAt);
    const keycloakMoved = await placed('keycloak-1', [1], drainedAt);
    load.stop();
    const result = await load.result;
    const balancer = await balancerSince(logOffset);
    const activeAt = performance.now();
    await setAvailability(2, 'active');
    const gatewayBack = await placed('gateway', [1, 2, 3], activeAt);
    await ready(replicaUrl(2));
    const backInRotation = await usedAgain(2, activeAt);
    const offset = upstream.seen.length;
    const after = await steadyLoad(requests, 8);
    const served = servedByHost(offset);
    printFigures(
      'host 2 drained (docker node update --availability drain)',
      {
        ...kindFigures(result),
        "HAProxy's answers by server and status": balancer.answers,
        "HAProxy's state changes": balancer.changes,
        'its gateway task stopped after': `${gatewayGone.toFixed(1)} s`,
        'Keycloak node 1 running and healthy on host 1 after': `${keycloakMoved.toFixed(1)} s`,
        'host 2 active again: its gateway task running after': `${gatewayBack.toFixed(1)} s`,
        'and answering through HAProxy after': `${backInRotation.toFixed(1)} s`,
        'then answered by host 1 / 2 / 3': servedFigure(served),
      },
      'swarm',
    );
    expect(failedOf(result)).toBe(0);
    expect(after.bad).toBe(0);
    expect(served[2]).toBeGreaterThan(0);
  }, 600_000);

  it('host 3 lost (its link cut) while it holds a Keycloak node: only requests in flight on it fail; Bearer, Basic and DPoP served; it rejoins and serves', async () => {
    expect(await runningOn('keycloak-2')).toEqual([3]);
    const requests = await warmRequests(org, forwardedPath, users);
    const { key, token } = await dpopGrant(users[2]!);
    const offset = upstream.seen.length;
    const logOffset = await balancerOffset();
    const load = loadUntilStopped(requests, 600);
    const dpop = dpopClient(key, token);
    await untilLoadRuns();
    const cutAt = performance.now();
    await hosts('cut', '3');
    let mendedAt = 0;
    try {
      const downAfter = await nodeStatus(3, 'down', cutAt);
      const keycloakMoved = await placed('keycloak-2', [1], cutAt);
      load.stop();
      const result = await load.result;
      const dpopResult = await dpop.stop();
      const served = servedByHost(offset);
      const balancer = await balancerSince(logOffset);
      mendedAt = performance.now();
      await hosts('mend', '3');
      const readyAfter = await nodeStatus(3, 'ready', mendedAt);
      await placed('gateway', [1, 2, 3], mendedAt);
      const servingAfter = await ready(replicaUrl(3), mendedAt);
      const backInRotation = await usedAgain(3, mendedAt);
      const againOffset = upstream.seen.length;
      const again = await steadyLoad(requests, 8);
      const servedAgain = servedByHost(againOffset);
      printFigures(
        'host 3 lost (its link cut), Keycloak node 2 on it',
        {
          ...kindFigures(result),
          'DPoP client through HAProxy (a fresh proof a request)': `${dpopResult.sent} requests, ${dpopResult.failed} failed, statuses ${JSON.stringify(dpopResult.statuses)}`,
          'answered by host 1 / 2 / 3 during the phase': servedFigure(served),
          "HAProxy's answers by server and status": balancer.answers,
          "HAProxy's state changes": balancer.changes,
          'the swarm called host 3 down after': `${downAfter.toFixed(1)} s`,
          'Keycloak node 2 running and healthy on host 1 after': `${keycloakMoved.toFixed(1)} s`,
          'link back: host 3 ready after': `${readyAfter.toFixed(1)} s`,
          'its replica ready after': `${servingAfter.toFixed(1)} s`,
          'and answering through HAProxy after': `${backInRotation.toFixed(1)} s`,
          'then answered by host 1 / 2 / 3': servedFigure(servedAgain),
        },
        'swarm',
      );
      // What was in flight on host 3 at the cut: at most one request a connection.
      expect(failedOf(result) + dpopResult.failed).toBeLessThanOrEqual(LOAD.connections + 1);
      expect(result.bearer.ok).toBeGreaterThan(0);
      expect(result.basic.ok).toBeGreaterThan(0);
      expect(dpopResult.statuses['200']).toBeGreaterThan(0);
      expect(served[1]).toBeGreaterThan(0);
      expect(served[2]).toBeGreaterThan(0);
      expect(again.bad).toBe(0);
      expect(servedAgain[3]).toBeGreaterThan(0);
    } finally {
      load.stop();
      if (!mendedAt) await hosts('mend', '3');
    }
  }, 900_000);

  it('rolling update of the gateway to a new image under load: no request failed', async () => {
    const requests = await warmRequests(org, forwardedPath, users);
    const logOffset = await balancerOffset();
    const load = loadUntilStopped(requests, 600);
    await untilLoadRuns();
    const since = performance.now();
    await updateGateway(images.nextGateway);
    const updateSeconds = (performance.now() - since) / 1000;
    load.stop();
    const result = await load.result;
    const balancer = await balancerSince(logOffset);
    printFigures(
      'rolling update of the gateway (docker service update --image)',
      {
        ...kindFigures(result),
        "HAProxy's answers by server and status": balancer.answers,
        "HAProxy's state changes": balancer.changes,
        'update of the three replicas, one at a time, took': `${updateSeconds.toFixed(1)} s`,
      },
      'swarm',
    );
    expect(failedOf(result)).toBe(0);
    expect(await runningOn('gateway')).toEqual([1, 2, 3]);
    expect(await gatewayUpdate()).toEqual({ image: images.nextGateway, state: 'completed' });
  }, 900_000);
});
