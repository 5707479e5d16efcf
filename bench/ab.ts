import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { openDatabase } from '../src/db/database.ts';
import { pinTree } from './affinity.ts';
import { createProvisioner } from './fixtures.ts';
import { runTogether, type LoadRequest } from './load.ts';
import { cpuSeconds, startChild, stopAllChildren } from './processes.ts';
import { automationPath } from './scenarios.ts';
import { DATA_DIR, readArgs } from './settings.ts';
import {
  dropDatabase,
  gatewayEnv,
  loadAverage,
  newSecrets,
  prepareDatabase,
  startBenchKeycloak,
  type BenchSecrets,
} from './stack.ts';
import { summarize } from './stats.ts';

/**
 * `node bench/ab.ts [--route forwarded|bearer|token] [--a <tree>] [--b <tree>] [--a-env K=V,...]
 * [--b-env K=V,...] [--auth-off a|b] [--profile a|b] [--rounds N] [--round-seconds S]`: is B slower than A? Two gateways loaded
 * at once, pinned together on one CPU; each round's B ÷ A, their median and spread. The routes
 * and how to read them: README.md. A tree needs its own `bench/gateway-process.ts` and
 * `node_modules` (a symlink will do).
 */
const run = promisify(execFile);
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = readArgs(process.argv.slice(2), {
  route: 'forwarded',
  a: here,
  b: here,
  'a-env': '',
  'b-env': '',
  rounds: 5,
  'round-seconds': 5,
  /** `a` or `b`: that side's verification is the constant principal (what auth costs). */
  'auth-off': '',
  /** `a` or `b`: that side runs under `--cpu-prof` (its rate then says less). */
  profile: '',
});
/** `K=V,K=V` as settings. */
const envOf = (spec: string) =>
  Object.fromEntries(
    spec
      .split(',')
      .filter(Boolean)
      .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
  );
const sides = [
  { name: 'A', tree: args.a, env: envOf(args['a-env']), port: 28500 },
  { name: 'B', tree: args.b, env: envOf(args['b-env']), port: 28510 },
];
const { route, rounds } = args;
if (!['forwarded', 'bearer', 'token'].includes(route)) throw new Error(`--route ${route}?`);
const roundSeconds = args['round-seconds'];
const ORG = 'bench-ab';
const WORKSPACE = 'ws1';
const DATABASE = 'realmgate_ab';
/** The constant principal of an auth-off gateway: the organization's workspace role. */
const ORG_ROLE = { organization: ORG, workspace: WORKSPACE };
const UPSTREAM_PORT = '28520';
const UPSTREAM = `http://127.0.0.1:${UPSTREAM_PORT}`;
const count = cpus().length;
const [measured, feeders] = [`${count - 1}`, `0-${Math.max(count - 2, 0)}`];

async function main(): Promise<void> {
  const databaseUrl = await prepareDatabase(DATABASE);
  await startChild('servers.ts', { env: { BENCH_PORT: UPSTREAM_PORT }, cpuList: feeders });
  const keycloak = route === 'bearer' ? await startKeycloak() : undefined;
  const pids: number[] = [];
  const profileDir = `${DATA_DIR}/profiles/ab-${new Date().toISOString()}`;
  for (const side of sides) {
    const profiled = args.profile.toUpperCase() === side.name;
    const gateway = await startChild(path.join(side.tree, 'bench/gateway-process.ts'), {
      env: { BENCH_GATEWAY: JSON.stringify(gatewaySpec(side, databaseUrl, keycloak)) },
      cpuList: measured,
      nodeArgs: profiled ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    });
    pids.push(gateway.pid);
    if (profiled) console.log(`${side.name}: CPU profile in ${profileDir} (pid ${gateway.pid})`);
  }
  const request = keycloak
    ? await provisionBearer(keycloak, databaseUrl)
    : await provisionAuthOff(databaseUrl);

  const both = (seconds: number) =>
    runTogether(
      sides.map((side) => ({
        url: `http://127.0.0.1:${side.port}`,
        connections: 32,
        durationSeconds: seconds,
        requests: [request],
      })),
      feeders,
    );
  console.log(`before the rounds: ${loadAverage()}`);
  // Unknown organizations are remembered for 5 s: warm up past that, then once more, uncounted.
  await both(6);
  const ratios: number[] = [];
  const byCpu: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const cpuBefore = pids.map(cpuSeconds);
    const databaseBefore = databaseCpuSeconds();
    const [a, b] = await both(roundSeconds);
    const database = databaseCpuSeconds() - databaseBefore;
    // CPU µs per answer of each side, and A's ÷ B's: the same ratio, from cost itself.
    const [ca, cb] = [a!, b!].map(
      (x, i) => ((cpuSeconds(pids[i]!) - cpuBefore[i]!) * 1e6) / Math.max(x.ok, 1),
    );
    const ratio = b!.reqPerSec / Math.max(a!.reqPerSec, 1);
    ratios.push(ratio);
    byCpu.push(ca! / Math.max(cb!, 1e-9));
    const bad = a!.bad + b!.bad ? ` (not 2xx: A ${a!.bad}, B ${b!.bad})` : '';
    // PostgreSQL's CPU in the round per answer of both sides: what neither gateway's counts.
    const databaseUs = (database * 1e6) / Math.max(a!.ok + b!.ok, 1);
    console.log(
      `round ${round}: A ${a!.reqPerSec.toFixed(0)} req/s (p99 ${a!.p99Ms} ms, ${ca!.toFixed(0)} µs CPU), ` +
        `B ${b!.reqPerSec.toFixed(0)} req/s (p99 ${b!.p99Ms} ms, ${cb!.toFixed(0)} µs CPU), ` +
        `B ÷ A ${ratio.toFixed(3)}, by CPU ${byCpu.at(-1)!.toFixed(3)}, ` +
        `PostgreSQL ${databaseUs.toFixed(1)} µs CPU per answer${bad}`,
    );
  }
  const { median, min, max } = summarize(ratios)!;
  const cpu = summarize(byCpu)!;
  console.log(
    `median B ÷ A: ${median.toFixed(3)} over ${rounds} rounds, spread ${min.toFixed(3)}-${max.toFixed(3)} ` +
      `(${(max - min).toFixed(3)}); by CPU time ${cpu.median.toFixed(3)} (${cpu.min.toFixed(3)}-${cpu.max.toFixed(3)}); ${loadAverage()}`,
  );
}

/** Each side's gateway settings: `bearer` takes the bench's (stack.ts), the others their own. */
function gatewaySpec(
  side: (typeof sides)[number],
  databaseUrl: string,
  keycloak: BenchKeycloak | undefined,
) {
  if (keycloak) {
    const stack = { secrets: keycloak.secrets, keycloakUrl: keycloak.kc.url, databaseUrl };
    // A cache of its own per side (Redis key prefix), as two deployments would have.
    const prefix = `${keycloak.secrets.redisKeyPrefix}${side.name}:`;
    const env = gatewayEnv(stack, side.port, {
      REDIS_KEY_PREFIX: prefix,
      AUTOMATION_UPSTREAM_URL: UPSTREAM,
      ...side.env,
    });
    const authOff = args['auth-off'].toUpperCase() === side.name;
    return { env, keycloakUrl: keycloak.kc.url, authOff: authOff ? ORG_ROLE : undefined };
  }
  const env = {
    HOST: '127.0.0.1',
    PORT: String(side.port),
    ADMIN_PORT: String(side.port + 1),
    LOG_LEVEL: 'silent',
    // The token route's Keycloak is the trivial upstream: it answers any request at once, so
    // what is measured is the gateway's /auth proxy, not Keycloak's password hashing.
    KEYCLOAK_URL: route === 'token' ? `${UPSTREAM}/auth` : 'http://127.0.0.1:9/auth',
    KEYCLOAK_ADMIN_PASSWORD: 'ab-admin-password-0123456789',
    KEYCLOAK_CLIENT_SECRET: 'ab-client-secret-0123456789',
    DATABASE_URL: databaseUrl,
    AUTOMATION_UPSTREAM_URL: UPSTREAM,
    REVOCATION_CHECK_SECONDS: 'off',
    ...side.env,
  };
  return {
    env,
    keycloakUrl: env.KEYCLOAK_URL,
    authOff: ORG_ROLE,
  };
}

/**
 * CPU seconds used so far by the PostgreSQL server's processes: its backends on this bench's
 * database and its shared writers (whatever else uses the server adds to the latter).
 */
function databaseCpuSeconds(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let command: string;
    try {
      command = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const shared = /^postgres: [^:]+: (walwriter|background writer|checkpointer)/.test(command);
    if (shared || (command.startsWith('postgres: ') && command.includes(` ${DATABASE} `))) {
      total += cpuSeconds(Number(entry));
    }
  }
  return total;
}

type BenchKeycloak = { kc: LocalKeycloak; secrets: BenchSecrets };

/** Keycloak with fresh state, on the feeders' CPUs, and this run's secrets. */
async function startKeycloak(): Promise<BenchKeycloak> {
  const secrets = newSecrets();
  const log = (text: string) => console.error(`[ab] ${text}`);
  log('starting Keycloak (fresh state)');
  const kc = await startBenchKeycloak(secrets, log);
  stopKeycloak = () => kc.stop();
  await pinTree(kc.pid, feeders);
  return { kc, secrets };
}
let stopKeycloak: (() => Promise<void>) | undefined;

/** Auth off: the organization's rows, and the request with any token. */
async function provisionAuthOff(databaseUrl: string): Promise<LoadRequest> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('INSERT INTO organizations (id, name) VALUES ($1, $1)', [ORG]);
  await db.query('INSERT INTO workspaces (organization_id, id, name) VALUES ($1, $2, $2)', [
    ORG,
    WORKSPACE,
  ]);
  await db.end();
  return route === 'token'
    ? {
        path: `/auth/realms/${ORG}/protocol/openid-connect/token`,
        form: `grant_type=refresh_token&client_id=_${ORG}-api&refresh_token=${'r'.repeat(800)}`,
      }
    : { path: automationPath(ORG), authorization: 'Bearer constant' };
}

/**
 * Auth on: the organization in Keycloak and the database (migrated by the gateways), a user
 * holding the workspace role, and one access token of that user, living an hour.
 */
async function provisionBearer(keycloak: BenchKeycloak, databaseUrl: string): Promise<LoadRequest> {
  const db = await openDatabase({ databaseUrl, dataDir: DATA_DIR });
  try {
    const provisioner = createProvisioner(keycloak.kc.url, keycloak.secrets, db);
    await provisioner.organization(ORG);
    await provisioner.longLivedTokens(ORG);
    const user = await provisioner.user(ORG, 'bench-ab-user');
    const { accessToken } = await provisioner.passwordGrant(user);
    return { path: automationPath(ORG), authorization: `Bearer ${accessToken}` };
  } finally {
    await db.destroy();
  }
}

try {
  await run('taskset', ['--version']);
  await main();
} finally {
  await stopAllChildren();
  await stopKeycloak?.();
  await dropDatabase(DATABASE);
}
