import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startLocalKeycloak, type LocalKeycloak } from '../keycloak/launcher.ts';
import type { GatewaySpec } from './gateway-process.ts';
import { startChild, type BenchChild } from './processes.ts';
import { ADMIN_PUBLIC_URL, DATA_DIR, HOST, PORTS, PUBLIC_URL } from './settings.ts';

const REALM_EXPORT_DIR = fileURLToPath(new URL('../realm-export', import.meta.url));
const BENCH_DATABASE = 'realmgate_bench';

/** Secrets of this run only: nothing is read from or written to the environment. */
export interface BenchSecrets {
  keycloakAdminUsername: string;
  keycloakAdminPassword: string;
  gatewayClientSecret: string;
  cacheSecret: string;
  redisKeyPrefix: string;
}

export function newSecrets(): BenchSecrets {
  const secret = () => randomBytes(24).toString('base64url');
  return {
    keycloakAdminUsername: 'admin',
    keycloakAdminPassword: secret(),
    gatewayClientSecret: secret(),
    cacheSecret: secret(),
    redisKeyPrefix: `realmgate-bench:${randomBytes(4).toString('hex')}:`,
  };
}

/** A real local Keycloak with fresh state in `.data/bench/keycloak`. */
export async function startBenchKeycloak(
  secrets: BenchSecrets,
  log: (message: string) => void,
): Promise<LocalKeycloak> {
  const stateDir = path.join(DATA_DIR, 'keycloak');
  await rm(stateDir, { recursive: true, force: true });
  return startLocalKeycloak({
    stateDir,
    httpPort: PORTS.keycloakHttp,
    managementPort: PORTS.keycloakManagement,
    publicUrl: PUBLIC_URL,
    adminPublicUrl: ADMIN_PUBLIC_URL,
    adminUsername: secrets.keycloakAdminUsername,
    adminPassword: secrets.keycloakAdminPassword,
    gatewayClientSecret: secrets.gatewayClientSecret,
    realmExportDir: REALM_EXPORT_DIR,
    log,
  });
}

/**
 * The PostgreSQL database of this run: `BENCH_DATABASE_URL` if set, else database
 * `realmgate_bench` on the local server, dropped and created anew, so that the bench neither
 * sees nor disturbs the tests' data.
 */
export async function prepareDatabase(): Promise<string> {
  if (process.env.BENCH_DATABASE_URL) return process.env.BENCH_DATABASE_URL;
  const server = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432';
  const client = new pg.Client({ connectionString: `${server}/postgres` });
  await client.connect();
  try {
    await client.query(`drop database if exists ${BENCH_DATABASE} with (force)`);
    await client.query(`create database ${BENCH_DATABASE}`);
  } finally {
    await client.end();
  }
  return `${server}/${BENCH_DATABASE}`;
}

export interface GatewayEnvInput {
  secrets: BenchSecrets;
  databaseUrl: string;
  keycloakUrl: string;
  port: number;
  extra?: Record<string, string>;
}

/** The environment one bench gateway is configured with (see src/config/config.ts). */
export function gatewayEnv(input: GatewayEnvInput): Record<string, string> {
  return {
    HOST,
    PORT: String(input.port),
    ADMIN_HOST: HOST,
    ADMIN_PORT: String(input.port + 1),
    // Every gateway verifies tokens for the issuer Keycloak writes: the main gateway's address.
    PUBLIC_URL,
    ADMIN_PUBLIC_URL,
    LOG_LEVEL: 'silent',
    KEYCLOAK_URL: input.keycloakUrl,
    KEYCLOAK_ADMIN_USERNAME: input.secrets.keycloakAdminUsername,
    KEYCLOAK_ADMIN_PASSWORD: input.secrets.keycloakAdminPassword,
    KEYCLOAK_CLIENT_SECRET: input.secrets.gatewayClientSecret,
    DATABASE_URL: input.databaseUrl,
    DATA_DIR,
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: input.secrets.redisKeyPrefix,
    REALMGATE_CACHE_SECRET: input.secrets.cacheSecret,
    AUTOMATION_UPSTREAM_URL: `http://${HOST}:${PORTS.upstream}`,
    ...input.extra,
  };
}

/** Starts one gateway process (see gateway-process.ts). */
export function startGatewayProcess(
  name: string,
  spec: GatewaySpec,
  nodeArgs: string[] = [],
): Promise<BenchChild> {
  return startChild({
    name,
    module: 'gateway-process.ts',
    env: { BENCH_GATEWAY: JSON.stringify(spec) },
    nodeArgs,
  });
}

export function startUpstream(): Promise<BenchChild> {
  return startChild({
    name: 'upstream',
    module: 'upstream.ts',
    env: { BENCH_PORT: String(PORTS.upstream) },
  });
}

export function startLimitProxy(): Promise<BenchChild> {
  return startChild({
    name: 'limit proxy',
    module: 'limit-proxy.ts',
    env: {
      BENCH_PORT: String(PORTS.limitProxy),
      BENCH_UPSTREAM: `http://${HOST}:${PORTS.upstream}`,
    },
  });
}

/**
 * SHA-256 (first 12 hex digits) over the paths and contents of src/: src changes while the
 * bench runs when others work in the same tree, and gateways started later would run other code.
 */
export async function sourceFingerprint(): Promise<string> {
  const root = fileURLToPath(new URL('../src', import.meta.url));
  const hash = createHash('sha256');
  for (const file of (await readdir(root, { recursive: true })).sort()) {
    const full = path.join(root, file);
    if ((await stat(full)).isFile()) hash.update(file).update(await readFile(full));
  }
  return hash.digest('hex').slice(0, 12);
}

/** The machine is shared: load average, and whether the tests' stack (18xxx) runs as well. */
export async function machineLoad(): Promise<string> {
  const listening = (port: number) =>
    new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: HOST, port });
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  const others: number[] = [];
  for (const port of [18000, 18080]) if (await listening(port)) others.push(port);
  const [one, five] = loadavg();
  return (
    `load average ${one!.toFixed(2)} (1 min), ${five!.toFixed(2)} (5 min); ` +
    (others.length
      ? `the tests' stack is running too (ports ${others.join(', ')})`
      : "the tests' stack is not running")
  );
}

/**
 * Waits (at most `maxSeconds`) until the machine is at least `idleShare` idle over one second,
 * e.g. until Keycloak has settled after provisioning. Linux only (`/proc/stat`); returns what
 * it saw, for the notes.
 */
export async function waitUntilQuiet(
  maxSeconds = 45,
  idleShare = 0.8,
): Promise<{ quiet: boolean; note: string }> {
  const sample = async () => {
    const fields = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/);
    const numbers = fields.slice(1).map(Number);
    const idle = (numbers[3] ?? 0) + (numbers[4] ?? 0);
    return { idle, total: numbers.reduce((sum, n) => sum + n, 0) };
  };
  const started = Date.now();
  let share = 0;
  try {
    while (Date.now() - started < maxSeconds * 1000) {
      const before = await sample();
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const after = await sample();
      share = (after.idle - before.idle) / Math.max(1, after.total - before.total);
      if (share >= idleShare) break;
    }
  } catch {
    return { quiet: false, note: 'could not read /proc/stat: did not wait for a quiet machine' };
  }
  const waited = ((Date.now() - started) / 1000).toFixed(0);
  return {
    quiet: share >= idleShare,
    note: `waited ${waited} s for a quiet machine: ${(share * 100).toFixed(0)}% idle at the start`,
  };
}
