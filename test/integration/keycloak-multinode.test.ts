import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  startLocalKeycloakCluster,
  type KeycloakClusterNode,
  type LocalKeycloakCluster,
} from '../../keycloak/cluster.ts';
import { loginAsBootstrapAdmin } from '../../src/keycloak/admin-client.ts';
import { ensureUser } from '../../src/demo/ensure-user.ts';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { recordNodeChanges } from '../helpers/node-changes.ts';

/*
 * A gateway in front of a two-node Keycloak cluster (KEYCLOAK_URL lists both), on a PostgreSQL
 * database of this suite's own: logins, refresh grants and token checks keep working when node 0
 * is killed (SIGKILL, as a crash), /readyz names its state, and once restarted it serves again.
 * Ports: Keycloak 28180/28181, management 29180/29181, clustering 27820/27821 (+100);
 * gateway 19100/19101.
 */

const server = process.env.KEYCLOAK_IT_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const database = `realmgate_multinode_${randomBytes(4).toString('hex')}`;
const stateDir = path.resolve(`.data/keycloak-cluster-${database}`);
const admin = { username: 'admin', password: randomBytes(24).toString('base64url') };
const gatewayClientSecret = randomBytes(24).toString('base64url');
const GATEWAY = 'http://127.0.0.1:19100';
const ADMIN = 'http://127.0.0.1:19101';
const CLIENT = '_platform-api';

let cluster: LocalKeycloakCluster | undefined;
let replica: Replica | undefined;
/** The replica's log lines about node states. */
const { logger, nodeChanges } = recordNodeChanges();

interface User {
  username: string;
  password: string;
}

async function createUser(nodeUrl: string): Promise<User> {
  const user = {
    username: `multinode-${randomBytes(4).toString('hex')}`,
    password: randomBytes(12).toString('base64url'),
  };
  const client = await loginAsBootstrapAdmin({ keycloakUrl: nodeUrl, ...admin, timeoutMs: 20_000 });
  await ensureUser(client, { realm: 'master', ...user });
  return user;
}

/** A grant through the gateway's /auth proxy. */
async function grant(form: Record<string, string>) {
  const res = await fetch(`${GATEWAY}/auth/realms/master/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({ client_id: CLIENT, ...form }),
  });
  const body = (await res.json()) as { access_token?: string; refresh_token?: string };
  return { status: res.status, body };
}

const login = (user: User) =>
  grant({ grant_type: 'password', scope: 'openid offline_access', ...user });
const refresh = (refreshToken: string) =>
  grant({ grant_type: 'refresh_token', refresh_token: refreshToken });

/** An API call as `authorization`: its HTTP status. */
async function api(authorization: string): Promise<number> {
  const res = await fetch(`${GATEWAY}/api/platform/organizations`, { headers: { authorization } });
  await res.body?.cancel();
  return res.status;
}

interface Readiness {
  status: number;
  keycloak: { status: string; nodes: { url: string; state: string; since: string }[] };
}

async function readyz(): Promise<Readiness> {
  const res = await fetch(`${ADMIN}/readyz`);
  const body = (await res.json()) as { data: { keycloak: Readiness['keycloak'] } };
  return { status: res.status, keycloak: body.data.keycloak };
}

/**
 * Repeats `attempt` until it reports success (the retry a client may make), for as long as
 * `EVENTUALLY` allows; prints how long it took and how many attempts, for the record. How long a
 * failover takes is the HA suite's figure and bound (test/ha/ha.test.ts, "kill -9 of a Keycloak
 * node": within 2 s, under load, on a stack of its own); on the machine the integration suite
 * shares, this test shows that it happens, not how fast.
 */
async function untilOk(what: string, attempt: () => Promise<boolean>): Promise<void> {
  const started = performance.now();
  let attempts = 0;
  await vi.waitFor(async () => {
    attempts++;
    if (!(await attempt())) throw new Error(`${what}: not yet, after ${attempts} attempt(s)`);
  }, EVENTUALLY);
  const ms = Math.round(performance.now() - started);
  console.log(`${what}: ok after ${ms} ms, ${attempts} attempt(s)`);
}

describe('the gateway in front of two Keycloak nodes', () => {
  let node0: KeycloakClusterNode;
  let node1: KeycloakClusterNode;

  beforeAll(async () => {
    await onPostgresServer(server, `create database ${database}`);
    cluster = await startLocalKeycloakCluster({
      nodes: 2,
      dbUrl: `${server}/${database}`,
      stateDir,
      firstHttpPort: 28180,
      firstManagementPort: 29180,
      firstClusterPort: 27820,
      publicUrl: GATEWAY,
      adminPublicUrl: ADMIN,
      adminUsername: admin.username,
      adminPassword: admin.password,
      gatewayClientSecret,
      realmExportDir: fileURLToPath(new URL('../../realm-export', import.meta.url)),
    });
    [node0, node1] = cluster.nodes as [KeycloakClusterNode, KeycloakClusterNode];
    replica = await startReplica(
      19100,
      {
        PUBLIC_URL: GATEWAY,
        ADMIN_PUBLIC_URL: ADMIN,
        KEYCLOAK_URL: `${node0.url}, ${node1.url}`,
        KEYCLOAK_ADMIN_PASSWORD: admin.password,
        KEYCLOAK_CLIENT_SECRET: gatewayClientSecret,
        KEYCLOAK_TIMEOUT_MS: '5000',
        BASIC_CACHE_MAX_SECONDS: '300',
        LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      },
      logger,
    );
  }, 420_000);

  afterAll(async () => {
    await replica?.gateway.close();
    await cluster?.stop();
    await onPostgresServer(server, `drop database if exists ${database} with (force)`);
    await rm(stateDir, { recursive: true, force: true });
  }, 120_000);

  it('serves through a SIGKILL of node 0, shows it down, and uses it again once restarted', async () => {
    const ready = await readyz();
    expect(ready).toMatchObject({ status: 200, keycloak: { status: 'up' } });
    expect(ready.keycloak.nodes.map(({ url, state }) => ({ url, state }))).toEqual([
      { url: node0.url, state: 'up' },
      { url: node1.url, state: 'up' },
    ]);

    const [cached, fresh, later] = [
      await createUser(node0.url),
      await createUser(node0.url),
      await createUser(node0.url),
    ];
    // Before the crash: a token pair through /auth, a verified token, a cached Basic login.
    const tokens = await login(cached);
    expect(tokens.status).toBe(200);
    const bearer = `Bearer ${tokens.body.access_token!}`;
    expect(await api(bearer)).toBe(200);
    expect(await api(basicAuth(cached))).toBe(200);
    // Both nodes took calls: a round of grants goes to each in turn.
    for (let i = 0; i < 2; i++) expect((await login(later)).status).toBe(200);

    await node0.kill();

    // What the gateway has verified needs no Keycloak: not one failure, at once.
    expect(await api(bearer)).toBe(200);
    expect(await api(basicAuth(cached))).toBe(200);
    // What needs Keycloak goes to node 1. The /auth proxy first: node 0 is still taken for up,
    // so one of these two grants is sent to it, refused, and sent to node 1 instead.
    let afterKillRefresh = '';
    await untilOk('password grant through /auth after SIGKILL', async () => {
      const answer = await login(later);
      afterKillRefresh = answer.body.refresh_token ?? '';
      return answer.status === 200;
    });
    await untilOk(
      'refresh grant through /auth of a session logged in after SIGKILL',
      async () => (await refresh(afterKillRefresh)).status === 200,
    );
    // Node 0 was taken out by the proxy, which sent that grant on to node 1. Node 1's own
    // changes are not this test's: on a loaded machine (three JVMs on two cores) one of its
    // calls may time out and miss a probe; that it serves is shown by the answers here and
    // readyz below.
    const changesOf = (node: number) => nodeChanges.filter((c) => c.startsWith(`${node} `));
    expect(changesOf(0)).toEqual(['0 down: /auth proxy: unreachable']);
    await untilOk(
      'new Basic login after SIGKILL of node 0',
      async () => (await api(basicAuth(fresh))) === 200,
    );
    // The session from before the crash survives it: refreshed once Keycloak's surviving node has
    // dropped the dead one from its cluster view (its failure detection waits a fixed second),
    // which is Keycloak's time, not the gateway's; the HA suite prints it.
    let refreshed = tokens.body.refresh_token!;
    await untilOk('refresh grant through /auth of the session from before SIGKILL', async () => {
      const answer = await refresh(refreshed);
      if (answer.status === 200) refreshed = answer.body.refresh_token!;
      return answer.status === 200;
    });
    // A token issued by node 1 is verified as well (same realm keys).
    const afterKill = await login(fresh);
    expect(await api(`Bearer ${afterKill.body.access_token!}`)).toBe(200);

    const degraded = await readyz();
    expect(degraded).toMatchObject({ status: 200, keycloak: { status: 'degraded' } });
    expect(degraded.keycloak.nodes.map((node) => node.state)).toEqual(['down', 'up']);
    const metrics = await (await fetch(`${ADMIN}/metrics`)).text();
    expect(metrics).toContain('realmgate_keycloak_node_up{node="0"} 0');
    expect(metrics).toContain('realmgate_keycloak_node_up{node="1"} 1');

    await node0.restart();
    await untilOk(
      'node 0 shown up again after its restart completed',
      async () => (await readyz()).keycloak.nodes[0]!.state === 'up',
    );
    expect(changesOf(0).at(-1)).toMatch(/^0 up: /);
    expect(await readyz()).toMatchObject({ status: 200, keycloak: { status: 'up' } });

    // Node 0 serves again: with node 1 gone now, logins, refreshes and admin reads go to it.
    await node1.kill();
    await untilOk(
      'new Basic login after SIGKILL of node 1',
      async () => (await api(basicAuth(later))) === 200,
    );
    expect((await refresh(refreshed)).status).toBe(200);
    const last = await readyz();
    expect(last.keycloak.nodes.map((node) => node.state)).toEqual(['up', 'down']);
  }, 300_000);
});
