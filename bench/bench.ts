import path from 'node:path';
import type { Knex } from 'knex';
import { configSchema } from '../src/config/config.ts';
import { grantsVersusAnswers, measureBurst, measureHalfLoad, type BurstOutcome } from './extras.ts';
import { provisionRealms, Provisioner, WORKSPACE, type BenchUser } from './fixtures.ts';
import type { GatewaySpec } from './gateway-process.ts';
import { measurePairs, type PairOutcome } from './pairs.ts';
import { memoryOf, type BenchChild } from './processes.ts';
import { profileGateway } from './profile-run.ts';
import type { HalfLoad, MemoryFigure } from './report.ts';
import { buildScenarios, origin } from './scenario-list.ts';
import { automationPath, measureScenarios, type ScenarioRuns } from './scenarios.ts';
import { DATA_DIR, PORTS, type BenchOptions } from './settings.ts';
import {
  gatewayEnv,
  machineLoad,
  startGatewayProcess,
  startLimitProxy,
  startUpstream,
  waitUntilQuiet,
  type BenchSecrets,
} from './stack.ts';

const ORG = 'bench';
/** Users taken in turn by the cache-off row, so that no two concurrent logins are identical. */
const NO_CACHE_USERS = 64;

export interface BenchOutcome {
  runs: ScenarioRuns[];
  pairs: PairOutcome[];
  halfLoad: HalfLoad | undefined;
  bursts: BurstOutcome[];
  memory: MemoryFigure[];
  profile: { file: string; summary: string } | undefined;
  notes: string[];
}

type Log = (message: string) => void;

interface BenchInput {
  options: BenchOptions;
  secrets: BenchSecrets;
  keycloakUrl: string;
  /** Keycloak's process group (its launcher's pid), kept off the CPU of pinned measurements. */
  keycloakPid: number;
  databaseUrl: string;
  log: Log;
  openDb: () => Promise<Knex>;
}

/** Everything between "Keycloak is up" and "results are in" (run.ts starts and stops the rest). */
export async function runBench(input: BenchInput): Promise<BenchOutcome> {
  const { options, log } = input;
  const notes: string[] = [];
  const note = (text: string) => {
    notes.push(text);
    log(text);
  };
  const revocationChecks = 'REVOCATION_CHECK_SECONDS' in configSchema.shape;
  const spec = (port: number, extra?: Record<string, string>): GatewaySpec => ({
    mode: 'full',
    keycloakUrl: input.keycloakUrl,
    env: gatewayEnv({ ...input, port, extra }),
  });
  const gateways = new Map<string, { child: BenchChild; idleRssMiB: number | undefined }>();
  const pidByOrigin = new Map<string, number>();
  const launch = async (name: string, gatewaySpec: GatewaySpec) => {
    const child = await startGatewayProcess(name, gatewaySpec);
    gateways.set(name, { child, idleRssMiB: memoryOf(child.pid)?.rssMiB });
    pidByOrigin.set(origin(Number(gatewaySpec.env.PORT)), child.pid);
  };

  log('starting the upstream, the limit proxy and the main gateway (it migrates the database)');
  const [upstream, limitProxy] = await Promise.all([startUpstream(), startLimitProxy()]);
  pidByOrigin.set(origin(PORTS.limitProxy), limitProxy.pid);
  await launch('Bearer gateway (defaults)', spec(PORTS.gateway));

  log('provisioning the organization and its users');
  const provisioner = new Provisioner(input.keycloakUrl, input.secrets, await input.openDb());
  await provisioner.organization(ORG);
  const users = async (prefix: string, count: number) => {
    const made: BenchUser[] = [];
    for (let i = 1; i <= count; i++) made.push(await provisioner.user(ORG, `${prefix}${i}`));
    return made;
  };
  const [bearerUser] = await users('bench-bearer-', 1);
  const [basicUser] = await users('bench-basic-', 1);
  const noCacheUsers = await users('bench-nocache-', NO_CACHE_USERS);
  const burstUsers = await users('bench-burst-', options.bursts);

  const off = revocationChecks ? { REVOCATION_CHECK_SECONDS: 'off' } : undefined;
  const noRevocation = (port: number, name: string) =>
    revocationChecks ? [launch(name, spec(port, off))] : [];
  await Promise.all([
    launch('auth-off gateway', {
      ...spec(PORTS.authOff, off),
      mode: 'auth-off',
      organization: ORG,
      workspace: WORKSPACE,
    }),
    launch('Bearer control gateway (defaults)', spec(PORTS.bearerControl)),
    launch('Basic gateway (defaults: warm cache, then the cold bursts)', spec(PORTS.basicWarm)),
    launch('list gateway (defaults)', spec(PORTS.list)),
    launch('Basic cache off gateway', spec(PORTS.basicNoCache, { BASIC_CACHE_MAX_SECONDS: '0' })),
    launch('many-tokens gateway (defaults)', spec(PORTS.manyTokens)),
    launch('many-realms gateway (defaults)', spec(PORTS.manyRealms)),
    ...noRevocation(PORTS.revocationOff, 'revocation-off gateway (1 token)'),
    ...noRevocation(PORTS.manyTokensRevocationOff, 'revocation-off gateway (many tokens)'),
    ...(revocationChecks
      ? [
          launch(
            'introspect-each gateway',
            spec(PORTS.introspectEach, { REVOCATION_CHECK_SECONDS: '0' }),
          ),
        ]
      : []),
  ]);

  const grant = await provisioner.passwordGrant(bearerUser!);
  log(`obtaining up to ${options.tokens} distinct access tokens by refresh grants`);
  let started = Date.now();
  const manyTokens = await provisioner.refreshedTokens(
    bearerUser!,
    grant.refreshToken,
    options.tokens,
    options.tokenBudgetSeconds * 1000,
  );
  let seconds = (Date.now() - started) / 1000;
  note(
    `${manyTokens.length} access tokens (${new Set(manyTokens).size} distinct) by refresh grants ` +
      `in ${seconds.toFixed(0)} s (${(manyTokens.length / seconds).toFixed(0)}/s, 12 in parallel)`,
  );

  log(
    `creating up to ${options.realms} organization realms (${options.realmBudgetSeconds} s at most)`,
  );
  started = Date.now();
  const realms = await provisionRealms(provisioner, {
    prefix: 'bench-r',
    count: options.realms,
    budgetMs: options.realmBudgetSeconds * 1000,
    concurrency: 4,
  });
  seconds = (Date.now() - started) / 1000;
  note(
    `${realms.length} organization realms (realm, workspace roles, user, rows, token) in ` +
      `${seconds.toFixed(0)} s, 4 at a time`,
  );

  const scenarios = buildScenarios({
    organization: ORG,
    token: grant.accessToken,
    manyTokens,
    realms,
    basicUser: basicUser!,
    noCacheUsers,
    revocationChecks,
  });
  for (const scenario of scenarios) scenario.pid = pidByOrigin.get(scenario.origin);
  log(
    `measuring: ${options.rounds} rounds × ${options.roundSeconds} s, ${options.connections} connections`,
  );
  note((await waitUntilQuiet()).note);
  notes.push(`before measuring: ${await machineLoad()}`);
  const runs = await measureScenarios(scenarios, options, log);
  notes.push(`after measuring: ${await machineLoad()}`);
  note(await grantsVersusAnswers(runs, noCacheUsers, provisioner, options.connections));

  log('paired rounds: each ratio measured with both rows under load at once');
  // The paired rounds keep the upstream and Keycloak off the measured CPU.
  const others = { pids: [upstream.pid], processGroups: [input.keycloakPid] };
  const pairs = await measurePairs(runs, others, options, log);
  const halfLoad = await measureHalfLoad(runs, options, log);

  const bursts: BurstOutcome[] = [];
  const path0 = automationPath(ORG, WORKSPACE);
  for (const user of burstUsers) {
    const burst = await measureBurst(
      origin(PORTS.basicWarm),
      path0,
      user,
      options.burstSize,
      provisioner,
    );
    bursts.push(burst);
    log(`cold burst ${user.username}: ${burst.passwordGrants} password grant(s), ${burst.ok} ok`);
  }

  const memory: MemoryFigure[] = [...gateways].map(([name, g]) => ({
    gateway: name,
    idleRssMiB: g.idleRssMiB,
    peakRssMiB: memoryOf(g.child.pid)?.peakRssMiB,
  }));

  let profile: BenchOutcome['profile'];
  if (options.profile) {
    log('CPU profile of a fresh gateway (defaults) under the Bearer load');
    const profiled = await profileGateway({
      spec: spec(PORTS.profiled),
      origin: origin(PORTS.profiled),
      requests: [{ path: path0, authorization: `Bearer ${grant.accessToken}` }],
      dir: path.join(DATA_DIR, 'profiles'),
      bench: options,
    });
    profile = { file: profiled.file, summary: profiled.summary };
    notes.push(
      `the profiled gateway served ${profiled.reqPerSec.toFixed(0)} req/s under the profiler`,
    );
  }
  return { runs, pairs, halfLoad, bursts, memory, profile, notes };
}
