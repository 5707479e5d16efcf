import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { openDatabase } from '../src/db/database.ts';
import { FEEDER_CPUS, MEASURED_CPU, pinTree } from './affinity.ts';
import { createProvisioner, WORKSPACE } from './fixtures.ts';
import { runTogether, type LoadRequest } from './load.ts';
import { pairedRounds } from './pairs.ts';
import { cpuGrowth, cpuSeconds, procFile, startChild, stopAllChildren } from './processes.ts';
import { automationPath, dpopRequest } from './scenarios.ts';
import { DATA_DIR, origin, readArgs } from './settings.ts';
import {
  dropDatabase,
  loadAverage,
  newSecrets,
  prepareDatabase,
  startBenchKeycloak,
  startGateway,
  type BenchSecrets,
} from './stack.ts';
import { summarize } from './stats.ts';

/**
 * `node bench/ab.ts [--route forwarded|bearer|dpop|token] [--a <tree>] [--b <tree>] [--a-env K=V,...]
 * [--b-env ...] [--auth-off a|b] [--a-bearer] [--profile a|b] [--rounds N] [--round-seconds S]
 * [--warmup-seconds S]`: is B slower than A? How to run and read it: README.md. A tree needs its
 * own `bench/` and `node_modules` (a symlink).
 */
const here = fileURLToPath(new URL('..', import.meta.url));
const args = readArgs(process.argv.slice(2), {
  route: 'forwarded',
  a: here,
  b: here,
  'a-env': '',
  'b-env': '',
  rounds: 5,
  'round-seconds': 5,
  /** ≥ 6: past the 5 s unknown organizations are remembered; a slower side's JIT needs ~30 s. */
  'warmup-seconds': 6,
  /** `a` or `b`: that side's verification is the constant principal (what auth costs). */
  'auth-off': '',
  /** `a` or `b`: that side runs under `--cpu-prof` (its rate then says less). */
  profile: '',
  /** With `--route dpop`: side A sent the user's unbound token as Bearer (DPoP ÷ Bearer). */
  'a-bearer': false,
});
/** `K=V,K=V` as settings. */
const envOf = (spec: string) =>
  Object.fromEntries(
    spec.split(',').flatMap((e) => (e ? [e.split(/=(.*)/s, 2) as [string, string]] : [])),
  );
const sides = [
  { name: 'A', tree: args.a, env: envOf(args['a-env']), port: 28500 },
  { name: 'B', tree: args.b, env: envOf(args['b-env']), port: 28510 },
];
const { route, rounds } = args;
if (!['forwarded', 'bearer', 'dpop', 'token'].includes(route)) throw new Error(`--route ${route}?`);
const roundSeconds = args['round-seconds'];
const ORG = 'bench-ab';
const DATABASE = 'realmgate_ab';
/** The constant principal of an auth-off gateway: the organization's workspace role. */
const ORG_ROLE = { organization: ORG, workspace: WORKSPACE };
const UPSTREAM_PORT = '28520';
const UPSTREAM = `http://127.0.0.1:${UPSTREAM_PORT}`;

async function main(): Promise<void> {
  const databaseUrl = await prepareDatabase(DATABASE);
  await startChild('servers.ts', { env: { BENCH_PORT: UPSTREAM_PORT }, cpuList: FEEDER_CPUS });
  const keycloak = route === 'bearer' || route === 'dpop' ? await startKeycloak() : undefined;
  // Without Keycloak (auth off on both sides), its address is the upstream's for the token
  // route: it answers any request at once, so what is measured is the gateway's /auth proxy.
  const fake = route === 'token' ? `${UPSTREAM}/auth` : 'http://127.0.0.1:9/auth';
  const stack = {
    secrets: keycloak?.secrets ?? newSecrets(),
    keycloakUrl: keycloak?.kc.url ?? fake,
    databaseUrl,
  };
  const pids: number[] = [];
  const profileDir = `${DATA_DIR}/profiles/ab-${new Date().toISOString()}`;
  for (const side of sides) {
    const authOff = !keycloak || args['auth-off'].toUpperCase() === side.name;
    const profiled = args.profile.toUpperCase() === side.name;
    const gateway = await startGateway(stack, side.port, {
      tree: side.tree,
      cpuList: MEASURED_CPU,
      nodeArgs: profiled ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
      authOff: authOff ? ORG_ROLE : undefined,
      extra: {
        // A cache of its own per side (Redis key prefix), as two deployments would have.
        REDIS_KEY_PREFIX: `${stack.secrets.redisKeyPrefix}${side.name}:`,
        AUTOMATION_UPSTREAM_URL: UPSTREAM,
        ...(keycloak ? {} : { REVOCATION_CHECK_SECONDS: 'off' }),
        ...side.env,
      },
    });
    pids.push(gateway.pid);
    if (profiled) console.log(`${side.name}: CPU profile in ${profileDir} (pid ${gateway.pid})`);
  }
  const db = await openDatabase({ databaseUrl, dataDir: DATA_DIR });
  const provisioned = keycloak
    ? provisionAuthOn(keycloak, db)
    : provisionAuthOff(db).then((request): SideRequests => ({ A: request, B: request }));
  const requests = await provisioned.finally(() => db.destroy());

  // B first: each round's ratio is B ÷ A, and by CPU A's cost ÷ B's.
  let databaseCpu = 0;
  const both = async (seconds: number) => {
    const before = databaseCpuByPid();
    const results = await runTogether(
      [...sides].reverse().map((side) => ({
        url: origin(side.port),
        connections: 32,
        durationSeconds: seconds,
        requests: [requests[side.name]!],
      })),
      FEEDER_CPUS,
    );
    databaseCpu = cpuGrowth(before, databaseCpuByPid());
    return results;
  };
  console.log(`before the rounds: ${loadAverage()}`);
  // Uncounted: past the 5 s unknown organizations are remembered, and the JIT's first tiers; in
  // loads of at most 10 s, as a DPoP load's proofs are signed before it and may not age past 50 s.
  for (let left = args['warmup-seconds']; left > 0; left -= 10) await both(Math.min(left, 10));
  const done = await pairedRounds(pids.reverse(), both, { rounds, roundSeconds }, (round, n) => {
    const [b, a] = round.results.map((x, i) => {
      const cpu = round.cpuMicros[i]!.toFixed(0);
      return `${x.reqPerSec.toFixed(0)} req/s (p99 ${x.p99Ms} ms, ${cpu} µs CPU)`;
    });
    const [rb, ra] = round.results.map((x) => x.bad);
    const bad = ra! + rb! ? ` (not 2xx: A ${ra}, B ${rb})` : '';
    // PostgreSQL's CPU in the round per answer of both sides: what neither gateway's counts.
    const answers = round.results.reduce((sum, x) => sum + x.ok, 0);
    const database = ((databaseCpu * 1e6) / Math.max(answers, 1)).toFixed(1);
    console.log(
      `round ${n}: A ${a}, B ${b}, B ÷ A ${round.ratio.toFixed(3)}, by CPU ${round.byCpu.toFixed(3)}, ` +
        `PostgreSQL ${database} µs CPU per answer${bad}`,
    );
  });
  const { median, min, max } = summarize(done.map((r) => r.ratio))!;
  const cpu = summarize(done.map((r) => r.byCpu))!;
  console.log(
    `median B ÷ A: ${median.toFixed(3)} over ${rounds} rounds, spread ${min.toFixed(3)}-${max.toFixed(3)} ` +
      `(${(max - min).toFixed(3)}); by CPU time ${cpu.median.toFixed(3)} (${cpu.min.toFixed(3)}-${cpu.max.toFixed(3)}); ${loadAverage()}`,
  );
}

/** CPU seconds so far of PostgreSQL's backends on the bench's database and its shared writers. */
function databaseCpuByPid(): Map<number, number> {
  const counted = new RegExp(
    `^postgres: .*( ${DATABASE} |walwriter|background writer|checkpointer)`,
  );
  const pids = readdirSync('/proc').filter((e) => counted.test(procFile(e, 'cmdline')));
  return new Map(pids.map((pid) => [Number(pid), cpuSeconds(Number(pid))]));
}

type BenchKeycloak = { kc: LocalKeycloak; secrets: BenchSecrets };

/** Keycloak with fresh state, on the feeders' CPUs, and this run's secrets. */
async function startKeycloak(): Promise<BenchKeycloak> {
  const secrets = newSecrets();
  const log = (text: string) => console.error(`[ab] ${text}`);
  log('starting Keycloak (fresh state)');
  const kc = await startBenchKeycloak(secrets, log);
  stopKeycloak = () => kc.stop();
  await pinTree(kc.pid, FEEDER_CPUS);
  return { kc, secrets };
}
let stopKeycloak: (() => Promise<void>) | undefined;

type SideRequests = Record<string, LoadRequest>;

/** Auth off: the organization's rows, and the request with any token. */
async function provisionAuthOff(db: Knex): Promise<LoadRequest> {
  await db('organizations').insert({ id: ORG, name: ORG });
  await db('workspaces').insert({ organization_id: ORG, id: WORKSPACE, name: WORKSPACE });
  return route === 'token'
    ? {
        path: `/auth/realms/${ORG}/protocol/openid-connect/token`,
        form: `grant_type=refresh_token&client_id=_${ORG}-api&refresh_token=${'r'.repeat(800)}`,
      }
    : { path: automationPath(ORG), authorization: 'Bearer constant' };
}

/**
 * Auth on: the organization in Keycloak and the database (migrated by the gateways), a user
 * holding the workspace role, and its token, living an hour: each side's request. `--route
 * dpop`: the token bound to a new key (a grant through A's `/auth`), a fresh proof per request.
 */
async function provisionAuthOn(keycloak: BenchKeycloak, db: Knex): Promise<SideRequests> {
  const provisioner = createProvisioner(keycloak.kc.url, keycloak.secrets, db);
  await provisioner.organization(ORG);
  await provisioner.longLivedTokens(ORG);
  const user = await provisioner.user(ORG, 'bench-ab-user');
  const path = automationPath(ORG);
  const { accessToken } = await provisioner.passwordGrant(user);
  const bearer = { path, authorization: `Bearer ${accessToken}` };
  if (route !== 'dpop') return { A: bearer, B: bearer };
  const dpop = dpopRequest(path, await provisioner.dpopGrant(origin(sides[0]!.port), user));
  return { A: args['a-bearer'] ? bearer : dpop, B: dpop };
}

try {
  execFileSync('taskset', ['--version']);
  await main();
} finally {
  await stopAllChildren();
  await stopKeycloak?.();
  await dropDatabase(DATABASE);
}
