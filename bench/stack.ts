import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startLocalKeycloak } from '../keycloak/launcher.ts';
import { startCommand } from './command-process.ts';
import type { GatewaySpec } from './gateway-process.ts';
import { startChild } from './processes.ts';
import { DATA_DIR, HOST, origin, PORTS } from './settings.ts';

/** Secrets of this run only: nothing is read from or written to the environment. */
export function newSecrets() {
  const secret = () => randomBytes(24).toString('base64url');
  return {
    keycloakAdminUsername: 'admin',
    keycloakAdminPassword: secret(),
    gatewayClientSecret: secret(),
    cacheSecret: secret(),
    redisKeyPrefix: `realmgate-bench:${randomBytes(4).toString('hex')}:`,
  };
}
export type BenchSecrets = ReturnType<typeof newSecrets>;

/** A real local Keycloak with fresh state in `.data/bench/keycloak`. */
export async function startBenchKeycloak(secrets: BenchSecrets, log: (message: string) => void) {
  const stateDir = path.join(DATA_DIR, 'keycloak');
  await rm(stateDir, { recursive: true, force: true });
  return startLocalKeycloak({
    stateDir,
    httpPort: PORTS.keycloakHttp,
    managementPort: PORTS.keycloakManagement,
    publicUrl: origin(PORTS.gateway),
    adminPublicUrl: origin(PORTS.gateway + 1),
    adminUsername: secrets.keycloakAdminUsername,
    adminPassword: secrets.keycloakAdminPassword,
    gatewayClientSecret: secrets.gatewayClientSecret,
    realmExportDir: fileURLToPath(new URL('../realm-export', import.meta.url)),
    log,
  });
}

const POSTGRES_SERVER = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';

/** Runs `statements` on the server's `postgres` database (creating and dropping others). */
async function onServer(...statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: `${POSTGRES_SERVER}/postgres` });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

/** `BENCH_DATABASE_URL`, else database `name` made anew on `BENCH_POSTGRES_URL` (not the tests'). */
export async function prepareDatabase(name = 'realmgate_bench'): Promise<string> {
  if (name === 'realmgate_bench' && process.env.BENCH_DATABASE_URL) {
    return process.env.BENCH_DATABASE_URL;
  }
  await onServer(`drop database if exists ${name} with (force)`, `create database ${name}`);
  return `${POSTGRES_SERVER}/${name}`;
}

/** Drops what `prepareDatabase(name)` created. */
export function dropDatabase(name: string): Promise<void> {
  return onServer(`drop database if exists ${name} with (force)`);
}

export type StackInfo = { secrets: BenchSecrets; keycloakUrl: string; databaseUrl: string };
type GatewayOptions = Pick<GatewaySpec, 'authOff'> & {
  extra?: Record<string, string>;
  nodeArgs?: string[];
  cpuList?: string;
  /** Another source tree (ab.ts): its own `bench/gateway-process.ts` and src. */
  tree?: string;
};

/** The bench's settings of a gateway on `port` (src/config) plus `extra`. */
export function gatewayEnv(stack: StackInfo, port: number, extra: Record<string, string> = {}) {
  const { secrets, keycloakUrl } = stack;
  return {
    HOST,
    PORT: String(port),
    ADMIN_HOST: HOST,
    ADMIN_PORT: String(port + 1),
    // Every gateway verifies tokens for the issuer Keycloak writes: the main gateway's address.
    PUBLIC_URL: origin(PORTS.gateway),
    ADMIN_PUBLIC_URL: origin(PORTS.gateway + 1),
    LOG_LEVEL: 'silent',
    KEYCLOAK_URL: keycloakUrl,
    KEYCLOAK_ADMIN_USERNAME: secrets.keycloakAdminUsername,
    KEYCLOAK_ADMIN_PASSWORD: secrets.keycloakAdminPassword,
    KEYCLOAK_CLIENT_SECRET: secrets.gatewayClientSecret,
    DATABASE_URL: stack.databaseUrl,
    DATA_DIR,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: secrets.redisKeyPrefix,
    REALMGATE_CACHE_SECRET: secrets.cacheSecret,
    AUTOMATION_UPSTREAM_URL: origin(PORTS.upstream),
    ...extra,
  };
}

/** One gateway process on `port`: `startGateway` from src with `gatewayEnv`. */
export function startGateway(stack: StackInfo, port: number, options: GatewayOptions = {}) {
  const env = gatewayEnv(stack, port, options.extra);
  const spec: GatewaySpec = { env, keycloakUrl: stack.keycloakUrl, authOff: options.authOff };
  const bench = { BENCH_GATEWAY: JSON.stringify(spec) };
  const module = options.tree
    ? path.join(options.tree, 'bench/gateway-process.ts')
    : 'gateway-process.ts';
  return startChild(module, { ...options, env: bench });
}

/**
 * realmgate as it is run (`node src/main.ts`, which forks the `WORKERS`), ready once it logs
 * that it listens; `LOG_LEVEL=info` writes nothing per 2xx.
 */
export function startMainProcess(stack: StackInfo, port: number, extra: Record<string, string>) {
  const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
  return startCommand({
    command: [process.execPath, main],
    env: gatewayEnv(stack, port, { LOG_LEVEL: 'info', ...extra }),
    port,
    readyText: '"msg":"realmgate is listening"',
  });
}

/** The upstream, and the limit proxy in front of it (servers.ts). */
export function startServers() {
  return Promise.all([
    startChild('servers.ts', { env: { BENCH_PORT: PORTS.upstream } }),
    startChild('servers.ts', {
      env: { BENCH_PORT: PORTS.limitProxy, BENCH_UPSTREAM: origin(PORTS.upstream) },
    }),
  ]);
}

/** SHA-256 (12 hex digits) over src/: others change it while the bench runs. */
export async function sourceFingerprint(): Promise<string> {
  const root = fileURLToPath(new URL('../src', import.meta.url));
  const hash = createHash('sha256');
  for (const file of (await readdir(root, { recursive: true })).sort()) {
    const full = path.join(root, file);
    if ((await stat(full)).isFile()) hash.update(file).update(await readFile(full));
  }
  return hash.digest('hex').slice(0, 12);
}

/** The machine is shared: its load average (1, 5, 15 min). */
export function loadAverage(): string {
  const [one, five, fifteen] = loadavg().map((v) => v.toFixed(1));
  return `load average ${one} ${five} ${fifteen}`;
}
