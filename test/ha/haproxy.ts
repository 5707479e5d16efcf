import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stopChild } from './gateway-process.ts';

/** The load balancer configuration docker-compose.yml ships, run here unchanged. */
export const HAPROXY_CONFIG = fileURLToPath(
  new URL('../../ops/haproxy/haproxy.cfg', import.meta.url),
);

export interface HaproxyOptions {
  /** `host:port` of the public and the admin frontend. */
  publicBind: string;
  adminBind: string;
  /** The address HAProxy connects to the replicas from (what their TRUSTED_PROXIES names). */
  sourceAddress: string;
  /** Each replica's public and admin listener, `host:port`. */
  gateways: [{ public: string; admin: string }, { public: string; admin: string }];
  /** Where HAProxy's request log and health-check messages go. */
  logFile: string;
}

export interface Haproxy {
  /** Base URL of the public frontend. */
  readonly url: string;
  readonly adminUrl: string;
  /** Where the log is so far: pass it to `logSince` to read what came after. */
  logOffset(): number;
  /** Requests each public server answered, and health-check state changes, since `offset`. */
  logSince(offset: number): { served: Record<string, number>; stateChanges: string[] };
  stop(): Promise<void>;
}

/** The variables ops/haproxy/haproxy.cfg reads, as docker-compose.yml sets them for its network. */
export function haproxyEnvironment(
  options: Omit<HaproxyOptions, 'logFile'>,
): Record<string, string> {
  const [one, two] = options.gateways;
  return {
    LB_PUBLIC_BIND: options.publicBind,
    LB_ADMIN_BIND: options.adminBind,
    LB_SOURCE_ADDRESS: options.sourceAddress,
    LB_GATEWAY_1_PUBLIC: one.public,
    LB_GATEWAY_1_ADMIN: one.admin,
    LB_GATEWAY_2_PUBLIC: two.public,
    LB_GATEWAY_2_ADMIN: two.admin,
  };
}

/**
 * HAProxy with the shipped configuration, the environment saying where things are (the
 * variables ops/haproxy/haproxy.cfg names). Resolves once the public frontend answers `/readyz`
 * 200.
 */
export async function startHaproxy(options: HaproxyOptions): Promise<Haproxy> {
  return runHaproxy(HAPROXY_CONFIG, haproxyEnvironment(options), options);
}

/**
 * HAProxy with the configuration `configFile`, `environment` its variables (LB_PUBLIC_BIND and
 * LB_ADMIN_BIND among them, which `options` repeats). `haproxy -c` checks the file first, so that
 * a broken configuration fails here with HAProxy's own message; then `haproxy -db` runs in the
 * foreground, its log in `logFile`. Resolves once the public frontend answers `/readyz` 200.
 */
export async function runHaproxy(
  configFile: string,
  environment: Record<string, string>,
  options: Pick<HaproxyOptions, 'publicBind' | 'adminBind' | 'logFile'>,
): Promise<Haproxy> {
  const env = { PATH: `${process.env.PATH ?? ''}:/usr/sbin`, ...environment };
  try {
    await promisify(execFile)('haproxy', ['-c', '-f', configFile], { env });
  } catch (err) {
    const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
    throw new Error(`haproxy -c refused ${configFile}:\n${stdout}${stderr}`, { cause: err });
  }
  const log = openSync(options.logFile, 'a');
  const child = spawn('haproxy', ['-db', '-f', configFile], {
    env,
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const url = `http://${options.publicBind}`;
  const stop = () => stopChild(child);
  try {
    await waitUntilServing(child, url, options.logFile);
  } catch (err) {
    await stop();
    throw err;
  }
  const logOffset = () => (existsSync(options.logFile) ? statSync(options.logFile).size : 0);
  return {
    url,
    adminUrl: `http://${options.adminBind}`,
    logOffset,
    logSince: (offset) => readLog(options.logFile, offset),
    stop,
  };
}

/**
 * With `option httplog`, each request is a line naming `<backend>/<server>`; a health check that
 * changes a server's state logs `Server <backend>/<server> is DOWN` (or UP).
 */
function readLog(logFile: string, offset: number) {
  return haproxyLogFigures(readFileSync(logFile).subarray(offset).toString('utf8'));
}

/** What an HAProxy log says: requests each replica served, and its replicas' state changes. */
export function haproxyLogFigures(text: string) {
  const served: Record<string, number> = {};
  for (const match of text.matchAll(/ gateways-public\/(\S+) /g)) {
    served[match[1]!] = (served[match[1]!] ?? 0) + 1;
  }
  const stateChanges = [...text.matchAll(/Server gateways-\w+\/\S+ is (?:DOWN|UP)[^\n]*/g)].map(
    (m) => m[0],
  );
  return { served, stateChanges };
}

async function waitUntilServing(child: ChildProcess, url: string, logFile: string) {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`haproxy exited with ${child.exitCode}; see ${logFile}`);
    }
    const status = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) })
      .then((res) => res.status)
      .catch(() => 0);
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`haproxy did not serve /readyz within 20 s; see ${logFile}`);
}
