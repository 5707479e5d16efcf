import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalKeycloakCluster, type LocalKeycloakCluster } from '../../keycloak/cluster.ts';
import { loginAsBootstrapAdmin } from '../../src/keycloak/admin-client.ts';
import { ensureUser } from '../../src/demo/ensure-user.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';

/*
 * Two local Keycloak nodes on one fresh PostgreSQL database form one cluster: a session made on
 * one node is used on the other, a change made through one node is seen at once by the other
 * (cache invalidation travels through the cluster, not through the database), and offline
 * sessions survive a node's SIGKILL. Ports 28080/28081, 29080/29081, 27800/27801 (+100).
 */

const server = process.env.KEYCLOAK_IT_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const database = `keycloak_it_${randomBytes(4).toString('hex')}`;
const stateDir = path.resolve(`.data/keycloak-cluster-${database}`);
const admin = { username: 'admin', password: randomBytes(24).toString('base64url') };
const gatewayClientSecret = randomBytes(24).toString('base64url');
const CLIENT = '_platform-api';
// The local server trusts local connections and never asks for it, but Keycloak is given one,
// to show that it stays off every command line.
const dbPassword = randomBytes(12).toString('hex');

let cluster: LocalKeycloakCluster | undefined;

interface Grant {
  status: number;
  body: { refresh_token?: string; error?: string; error_description?: string };
}

async function token(nodeUrl: string, form: Record<string, string>): Promise<Grant> {
  const response = await fetch(`${nodeUrl}/realms/master/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({ client_id: CLIENT, ...form }),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: response.status, body: (await response.json()) as Grant['body'] };
}

const login = (nodeUrl: string, user: { username: string; password: string }, scope = 'openid') =>
  token(nodeUrl, { grant_type: 'password', scope, ...user });

const refresh = (nodeUrl: string, refreshToken: string) =>
  token(nodeUrl, { grant_type: 'refresh_token', refresh_token: refreshToken });

async function createUser(nodeUrl: string) {
  const user = {
    username: `cluster-${randomBytes(4).toString('hex')}`,
    password: randomBytes(12).toString('base64url'),
  };
  const client = await loginAsBootstrapAdmin({ keycloakUrl: nodeUrl, ...admin, timeoutMs: 20_000 });
  const id = await ensureUser(client, { realm: 'master', ...user });
  return { ...user, id, client };
}

describe('a local Keycloak cluster on PostgreSQL', () => {
  beforeAll(async () => {
    await onPostgresServer(server, `create database ${database}`);
    cluster = await startLocalKeycloakCluster({
      nodes: 2,
      dbUrl: `${server.replace('://postgres@', `://postgres:${dbPassword}@`)}/${database}`,
      stateDir,
      firstHttpPort: 28080,
      firstManagementPort: 29080,
      firstClusterPort: 27800,
      publicUrl: 'http://127.0.0.1:28000',
      adminPublicUrl: 'http://127.0.0.1:28001',
      adminUsername: admin.username,
      adminPassword: admin.password,
      gatewayClientSecret,
      realmExportDir: fileURLToPath(new URL('../../realm-export', import.meta.url)),
    });
  }, 420_000);

  afterAll(async () => {
    await cluster?.stop();
    await onPostgresServer(server, `drop database if exists ${database} with (force)`);
    await rm(stateDir, { recursive: true, force: true });
  }, 120_000);

  it('forms one cluster, shares sessions and survives a SIGKILL of a node', async () => {
    const [a, b] = cluster!.nodes as [
      LocalKeycloakCluster['nodes'][number],
      LocalKeycloakCluster['nodes'][number],
    ];
    // Each node logged a view of both members.
    expect(a.clusterSize()).toBe(2);
    expect(b.clusterSize()).toBe(2);
    expect(execFileSync('ps', ['-eww', '-o', 'args'], { encoding: 'utf8' })).not.toContain(
      dbPassword,
    );

    const user = await createUser(a.url);
    const online = await login(a.url, user);
    const offline = await login(a.url, user, 'openid offline_access');
    expect(online.status).toBe(200);
    expect(offline.status).toBe(200);
    // A's session, refreshed on B.
    expect((await refresh(b.url, online.body.refresh_token!)).status).toBe(200);
    expect((await refresh(b.url, offline.body.refresh_token!)).status).toBe(200);

    // Invalidation goes through the cluster: B has this user cached (it just logged in there),
    // A disables it, and B refuses the next login at once rather than from its stale cache.
    const other = await createUser(a.url);
    expect((await login(b.url, other)).status).toBe(200);
    await other.client.users.update({ realm: 'master', id: other.id }, { enabled: false });
    expect((await login(b.url, other)).body.error).toBe('invalid_grant');

    await a.kill();
    const started = performance.now();
    const afterKill = await refresh(b.url, offline.body.refresh_token!);
    const took = Math.round(performance.now() - started);
    console.log(`first offline refresh on node 1 after SIGKILL of node 0: ${took} ms`);
    expect(afterKill.status).toBe(200);
    expect((await refresh(b.url, online.body.refresh_token!)).status).toBe(200);
    expect((await login(b.url, user)).status).toBe(200);

    // The killed node comes back and rejoins.
    await a.restart();
    expect(a.clusterSize()).toBe(2);
    expect((await refresh(a.url, afterKill.body.refresh_token!)).status).toBe(200);
  }, 300_000);
});
