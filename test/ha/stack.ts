import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import knex, { type Knex } from 'knex';
import { createProvisioner, type Provisioner } from '../../bench/fixtures.ts';
import { newSecrets } from '../../bench/stack.ts';
import { startLocalKeycloakCluster, type LocalKeycloakCluster } from '../../keycloak/cluster.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';
import { startPostgresProcess, type PostgresProcess } from '../helpers/postgres-process.ts';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { startHaproxy, type Haproxy } from './haproxy.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';

/*
 * The HA stack: two Keycloak nodes on a PostgreSQL database of their own (on the shared
 * server), a redis-server and a PostgreSQL server of the suite's own for the gateways (stopping
 * either disturbs nothing else), a recording upstream, two gateway replicas in processes of
 * their own, each told about both Keycloak nodes and sharing Redis, the cache secret and the
 * platform database, and HAProxy in front of them with the configuration docker-compose.yml
 * ships. Ports: Keycloak http 28280/28281, management 29280/29281, clustering 27840/27841 (and
 * +100); Redis 16390; the platform PostgreSQL 16432; replicas 20000/20001 and 20010/20011;
 * HAProxy 20020/20021, connecting to the replicas from 127.0.0.10.
 */

const POSTGRES = process.env.HA_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
const REDIS_PORT = 16390;
const PLATFORM_POSTGRES_PORT = 16432;
const LB_PUBLIC = '127.0.0.1:20020';
const LB_ADMIN = '127.0.0.1:20021';
/** HAProxy's own address towards the replicas: the only one they trust for X-Forwarded-*. */
export const LB_SOURCE_ADDRESS = '127.0.0.10';
const PUBLIC_URL = `http://${LB_PUBLIC}`;
const ADMIN_PUBLIC_URL = `http://${LB_ADMIN}`;
const REPLICA_PORTS = [20000, 20010] as const;

export interface HaStack {
  cluster: LocalKeycloakCluster;
  redis: RedisServer;
  /** The gateways' platform database server (`DATABASE_URL`). */
  platformDb: PostgresProcess;
  upstream: RecordingUpstream;
  /** Replica A and replica B. */
  replicas: [GatewayProcess, GatewayProcess];
  /** HAProxy in front of both replicas: where the steady load goes. */
  haproxy: Haproxy;
  /** Organizations and users, through a Keycloak node directly (see bench/fixtures.ts). */
  provisioner: Provisioner;
  stop(): Promise<void>;
}

/** Starts everything, in dependency order; on any failure stops what had started. */
export async function startHaStack(log: (message: string) => void): Promise<HaStack> {
  const run = randomBytes(4).toString('hex');
  const keycloakDb = `keycloak_ha_${run}`;
  const stateDir = path.resolve(`.data/ha-${run}`);
  const secrets = newSecrets();
  const started: { stop(): Promise<void> }[] = [];
  let db: Knex | undefined;
  const stopAll = async () => {
    for (const part of started.reverse()) await part.stop().catch(() => undefined);
    await db?.destroy();
    await onPostgresServer(POSTGRES, `drop database if exists ${keycloakDb} with (force)`);
    await rm(stateDir, { recursive: true, force: true });
  };
  try {
    await mkdir(stateDir, { recursive: true });
    await onPostgresServer(POSTGRES, `create database ${keycloakDb}`);
    const platformDb = await startPostgresProcess(PLATFORM_POSTGRES_PORT);
    started.push({ stop: () => platformDb.destroy() });
    await onPostgresServer(platformDb.url, 'create database realmgate');
    const clusterStart = Date.now();
    const cluster = await startLocalKeycloakCluster({
      nodes: 2,
      dbUrl: `${POSTGRES}/${keycloakDb}`,
      stateDir: path.join(stateDir, 'keycloak'),
      firstHttpPort: 28280,
      firstManagementPort: 29280,
      firstClusterPort: 27840,
      publicUrl: PUBLIC_URL,
      adminPublicUrl: ADMIN_PUBLIC_URL,
      adminUsername: secrets.keycloakAdminUsername,
      adminPassword: secrets.keycloakAdminPassword,
      gatewayClientSecret: secrets.gatewayClientSecret,
      realmExportDir: fileURLToPath(new URL('../../realm-export', import.meta.url)),
      log,
    });
    started.push(cluster);
    log(
      `Keycloak cluster of 2 nodes ready in ${((Date.now() - clusterStart) / 1000).toFixed(0)} s`,
    );
    const redis = await startRedisServer(REDIS_PORT);
    started.push(redis);
    const upstream = await startRecordingUpstream();
    started.push({ stop: () => upstream.close() });

    const databaseUrl = `${platformDb.url}/realmgate`;
    const shared = {
      HOST: '127.0.0.1',
      ADMIN_HOST: '127.0.0.1',
      // Keycloak writes this issuer into every token; both replicas verify it.
      PUBLIC_URL,
      ADMIN_PUBLIC_URL,
      // Keycloak posts logout tokens through the load balancer's admin side, to either replica.
      BACKCHANNEL_LOGOUT_URL: `${ADMIN_PUBLIC_URL}/backchannel-logout`,
      LOG_LEVEL: 'warn',
      KEYCLOAK_URL: cluster.nodes.map((node) => node.url).join(','),
      KEYCLOAK_ADMIN_USERNAME: secrets.keycloakAdminUsername,
      KEYCLOAK_ADMIN_PASSWORD: secrets.keycloakAdminPassword,
      KEYCLOAK_CLIENT_SECRET: secrets.gatewayClientSecret,
      DATABASE_URL: databaseUrl,
      REDIS_URL: redis.url,
      REDIS_KEY_PREFIX: `realmgate-ha:${run}:`,
      REALMGATE_CACHE_SECRET: secrets.cacheSecret,
      AUTOMATION_UPSTREAM_URL: upstream.url,
      // As in production: only the load balancer's X-Forwarded-For is believed.
      TRUSTED_PROXIES: LB_SOURCE_ADDRESS,
      // Every request comes from 127.0.0.1: the per-address login limit would count them all.
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      SHUTDOWN_GRACE_SECONDS: '2',
    };
    const replicas: GatewayProcess[] = [];
    // One after the other: the first migrates the fresh database.
    for (const [i, port] of REPLICA_PORTS.entries()) {
      const name = 'ab'[i]!;
      const dataDir = path.join(stateDir, `gateway-${name}`);
      await mkdir(dataDir, { recursive: true });
      const env = {
        ...shared,
        PORT: String(port),
        ADMIN_PORT: String(port + 1),
        DATA_DIR: dataDir,
      };
      const replica = await startGatewayProcess(env, path.join(dataDir, 'gateway.log'));
      started.push(replica);
      replicas.push(replica);
    }
    const haproxy = await startHaproxy({
      publicBind: LB_PUBLIC,
      adminBind: LB_ADMIN,
      sourceAddress: LB_SOURCE_ADDRESS,
      gateways: REPLICA_PORTS.map((port) => ({
        public: `127.0.0.1:${port}`,
        admin: `127.0.0.1:${port + 1}`,
      })) as [{ public: string; admin: string }, { public: string; admin: string }],
      logFile: path.join(stateDir, 'haproxy.log'),
    });
    started.push(haproxy);
    db = knex({ client: 'pg', connection: databaseUrl, pool: { min: 0, max: 2 } });
    // Used before any node is killed: the suite provisions everything up front.
    const provisioner = createProvisioner(cluster.nodes[1]!.url, secrets, db);
    return {
      cluster,
      redis,
      platformDb,
      upstream,
      replicas: replicas as [GatewayProcess, GatewayProcess],
      haproxy,
      provisioner,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
