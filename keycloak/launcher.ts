import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync, readFileSync, existsSync } from 'node:fs';
import { copyFile, mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { ensureKeycloakHome } from './distribution.ts';
import { parsePostgresUrl } from './postgres-url.ts';

export interface LocalKeycloakOptions {
  /** Folder for this instance's database, transaction log and log file. */
  stateDir: string;
  httpPort: number;
  managementPort: number;
  /** Public base address of the gateway; token `iss` is `<publicUrl>/auth/realms/<realm>`. */
  publicUrl: string;
  /** Address of the gateway's admin listener, where the admin console is served. */
  adminPublicUrl: string;
  adminUsername: string;
  adminPassword: string;
  /** Secret of the gateway's confidential client, substituted into the imported master realm. */
  gatewayClientSecret: string;
  /** Folder holding `master.json`. */
  realmExportDir: string;
  /**
   * PostgreSQL URL (`postgres://user:pass@host:5432/keycloak`): Keycloak runs on that database,
   * from a distribution built with `--db=postgres`. Unset: embedded H2 under `stateDir`.
   */
  dbUrl?: string;
  /**
   * Join the Keycloak cluster of every node on the same database (distributed Infinispan
   * caches, `jdbc-ping` discovery through that database, no multicast), with the clustering
   * transport on 127.0.0.1:`clusterPort` and its failure detection on `clusterPort + 100`.
   * Needs `dbUrl`. Unset: Keycloak's defaults.
   */
  clusterPort?: number;
  /** Java heap ceiling, e.g. `512m`; default `1g`. */
  maxHeap?: string;
  cacheDir?: string;
  readyTimeoutMs?: number;
  log?: (message: string) => void;
}

/** Failure detection (JGroups FD_SOCK2) listens this far above the clustering port. */
export const FAILURE_DETECTION_PORT_OFFSET = 100;

export interface LocalKeycloak {
  /** Base URL including `/auth`, e.g. `http://127.0.0.1:8080/auth`. */
  readonly url: string;
  readonly pid: number;
  /** This instance's log file (appended to across restarts). */
  readonly logFile: string;
  /** Stops Keycloak and waits until its Java process has exited. */
  stop(): Promise<void>;
  /** SIGKILL to Keycloak and its wrapper, as a crash would; waits until its ports are free. */
  kill(): Promise<void>;
}

/**
 * The wrapper between us and Java. Keycloak ignores its stdin, so the wrapper reads ours: when
 * this Node process dies in any way (even SIGKILL) the pipe closes and Keycloak goes with it.
 */
const WRAPPER = `
"$KC_HOME/bin/kc.sh" "$@" &
kc=$!
( while read -r _; do :; done; kill -TERM $kc 2>/dev/null ) <&0 &
watcher=$!
trap 'kill -TERM $kc 2>/dev/null' TERM INT
wait $kc; status=$?
while kill -0 $kc 2>/dev/null; do wait $kc; status=$?; done
kill $watcher 2>/dev/null
exit $status
`;

/**
 * Starts a real Keycloak as a local Java process with realmgate's realms imported, and waits
 * until it serves tokens. The distribution is fetched and built on first use.
 */
export async function startLocalKeycloak(options: LocalKeycloakOptions): Promise<LocalKeycloak> {
  const log = options.log ?? (() => undefined);
  const database = options.dbUrl ? parsePostgresUrl(options.dbUrl) : undefined;
  if (options.clusterPort !== undefined && !database) {
    throw new Error('a clustered Keycloak needs a PostgreSQL database (dbUrl)');
  }
  const home = await ensureKeycloakHome({
    cacheDir: options.cacheDir,
    log,
    db: database ? 'postgres' : 'dev-file',
  });
  for (const port of portsOf(options)) {
    if (await isPortTaken(port)) {
      throw new Error(`port ${port} is already in use; is another Keycloak running?`);
    }
  }
  const stateDir = path.resolve(options.stateDir);
  await mkdir(stateDir, { recursive: true });
  // `--import-realm` reads <home>/data/import; a realm that already exists is skipped.
  const importDir = path.join(home, 'data', 'import');
  await mkdir(importDir, { recursive: true });
  await copyFile(
    path.join(options.realmExportDir, 'master.json'),
    path.join(importDir, 'master.json'),
  );

  const args = [
    'start',
    '--optimized',
    '--http-enabled=true',
    '--http-host=127.0.0.1',
    `--http-port=${options.httpPort}`,
    `--http-management-port=${options.managementPort}`,
    `--hostname=${options.publicUrl}/auth`,
    `--hostname-admin=${options.adminPublicUrl}/auth`,
    '--hostname-backchannel-dynamic=true',
    '--proxy-headers=xforwarded',
    // With brute-force detection on, Keycloak 26 lets only one login of a user run at a time
    // and refuses the others as if locked: concurrent good logins (replicas, parallel jobs, the
    // provisioning session) would fail. Failures are still counted, one by one.
    '--spi-brute-force-protector--default-brute-force-detector--allow-concurrent-requests=true',
    ...(database
      ? [
          `--db-url=${database.jdbcUrl}`,
          ...(database.username ? [`--db-username=${database.username}`] : []),
        ]
      : [`--db-url=jdbc:h2:file:${path.join(stateDir, 'h2', 'keycloakdb')};NON_KEYWORDS=VALUE`]),
    ...(options.clusterPort !== undefined
      ? [
          '--cache=ispn',
          '--cache-stack=jdbc-ping',
          '--cache-embedded-network-bind-address=127.0.0.1',
          `--cache-embedded-network-bind-port=${options.clusterPort}`,
        ]
      : // A single node keeps its caches in process: no clustering port opens, on any interface,
        // and two single nodes on one database never join each other by accident.
        ['--cache=local']),
    '--import-realm',
  ];
  const javaOptions = [
    `-Dquarkus.transaction-manager.object-store.directory=${path.join(stateDir, 'transaction-logs')}`,
    // Infinispan's default offset (50000) would put it past port 65535 for ports above 15535.
    ...(options.clusterPort !== undefined
      ? [`-Djgroups.fd.port-offset=${FAILURE_DETECTION_PORT_OFFSET}`]
      : []),
  ];
  // Only ours: a KC_DB_* inherited from the caller's environment must not leak in.
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['KC_DB', 'KC_DB_URL', 'KC_DB_USERNAME', 'KC_DB_PASSWORD']) delete env[name];
  // The password goes through the environment: a command line is visible to every user (ps).
  if (database?.password) env.KC_DB_PASSWORD = database.password;
  const logFile = path.join(stateDir, 'keycloak.log');
  const logFd = openSync(logFile, 'a');
  const child = spawn('bash', ['-c', WRAPPER, 'keycloak-wrapper', ...args], {
    detached: true,
    stdio: ['pipe', logFd, logFd],
    env: {
      ...env,
      KC_HOME: home,
      KC_BOOTSTRAP_ADMIN_USERNAME: options.adminUsername,
      KC_BOOTSTRAP_ADMIN_PASSWORD: options.adminPassword,
      REALMGATE_KEYCLOAK_CLIENT_SECRET: options.gatewayClientSecret,
      JAVA_OPTS_KC_HEAP: `-Xms128m -Xmx${options.maxHeap ?? '1g'}`,
      JAVA_OPTS_APPEND: javaOptions.join(' '),
    },
  });
  closeSync(logFd);
  const on = database ? ` on ${database.display}` : '';
  log(`starting Keycloak on 127.0.0.1:${options.httpPort}${on} (log: ${logFile})`);

  const url = `http://127.0.0.1:${options.httpPort}/auth`;
  const keycloak: LocalKeycloak = {
    url,
    pid: child.pid ?? -1,
    logFile,
    stop: () => stopProcess(child),
    kill: () => killProcess(child, portsOf(options)),
  };
  try {
    await waitUntilServing(child, url, options, options.readyTimeoutMs ?? 180_000);
  } catch (err) {
    await keycloak.stop();
    throw new Error(
      `${(err as Error).message}\n--- last lines of ${logFile} ---\n${tail(logFile)}`,
      { cause: err },
    );
  }
  // Let Node exit without waiting for Keycloak; the closed stdin pipe then stops it.
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  log(`Keycloak is ready at ${url}`);
  return keycloak;
}

/** Ready means: health says UP and the imported gateway client can get a token. */
async function waitUntilServing(
  child: ChildProcess,
  url: string,
  options: LocalKeycloakOptions,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error('Keycloak exited during start');
    if (await canGetServiceToken(url, options)) return;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`Keycloak was not ready within ${timeoutMs} ms`);
}

async function canGetServiceToken(url: string, options: LocalKeycloakOptions): Promise<boolean> {
  try {
    const health = await fetch(`http://127.0.0.1:${options.managementPort}/auth/health/ready`, {
      signal: AbortSignal.timeout(2000),
    });
    if (health.status !== 200) return false;
    const token = await fetch(`${url}/realms/master/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: 'realmgate-gateway',
        client_secret: options.gatewayClientSecret,
      }),
      signal: AbortSignal.timeout(5000),
    });
    return token.status === 200;
  } catch {
    return false;
  }
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    // The wrapper and Java share a process group: take both down.
    if (child.pid) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }, 30_000);
  await exited;
  clearTimeout(timer);
}

/** Sends SIGKILL to the whole process group, then waits until the ports are free again. */
async function killProcess(child: ChildProcess, ports: number[]): Promise<void> {
  if (child.exitCode === null && child.signalCode === null && child.pid) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
    await exited;
  }
  const deadline = Date.now() + 10_000;
  for (const port of ports) {
    while ((await isPortTaken(port)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function portsOf(options: LocalKeycloakOptions): number[] {
  const ports = [options.httpPort, options.managementPort];
  if (options.clusterPort !== undefined) {
    ports.push(options.clusterPort, options.clusterPort + FAILURE_DETECTION_PORT_OFFSET);
  }
  return ports;
}

function isPortTaken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function tail(file: string, lines = 40): string {
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
}
