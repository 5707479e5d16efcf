import { readdir } from 'node:fs/promises';
import { createProvisioner, provision, WORKSPACE } from './fixtures.ts';
import { fleetMode } from './fleet-driver.ts';
import { runBench, type BenchContext, type ModeResult } from './harness.ts';
import { runLoad } from './load.ts';
import { measurePairs } from './pairs.ts';
import { peakRssMiB } from './processes.ts';
import { formatReport, judgeTargets, rowsOf } from './report.ts';
import { buildScenarios, loadOf, measureScenarios, startRows, type Scenario } from './scenarios.ts';
import {
  formatSideBySide,
  judgeSideTargets,
  measureSideBySide,
  type SideBySide,
} from './side-by-side.ts';
import { DATA_DIR, parseOptions, PORTS } from './settings.ts';
import * as stack from './stack.ts';

/**
 * `npm run bench`: in the harness (harness.ts: Keycloak, the database, the report), the rows:
 * the upstream, the limit proxy and one gateway per row; every row measured, then the paired
 * ratios; with `--peers` then the side-by-side rows (realmgate's workers beside Apache and
 * HAProxy), or those alone with `--peers-only`. `--fleet`: the fleet scenario alone.
 */
const options = parseOptions(process.argv.slice(2));
await runBench(options, options.fleet ? fleetMode : rowsMode);

/** The rows, the paired ratios, the CPU profile and the side-by-side rows, as asked. */
async function rowsMode(context: BenchContext): Promise<ModeResult> {
  const { stack: info, keycloak, log, note, openDatabase } = context;
  const seconds = (since: number) => ((Date.now() - since) / 1000).toFixed(0);
  log('starting the upstream, the limit proxy and the main gateway (it migrates the database)');
  const [[upstream, limit], main] = await Promise.all([
    stack.startServers(),
    stack.startGateway(info, PORTS.gateway),
  ]);

  log('provisioning users, tokens and organizations');
  const db = await openDatabase();
  const since = Date.now();
  const provisioner = createProvisioner(keycloak.url, info.secrets, db);
  // The side-by-side rows alone need one token.
  const [tokens, realms] = options.peersOnly ? [1, 0] : [options.tokens, options.realms];
  const made = await provision(provisioner, 'bench', tokens, realms);
  note(
    `${made.manyTokens.length} tokens, ${made.realms.length} organizations in ${seconds(since)} s`,
  );
  const scenarios = buildScenarios({ organization: 'bench', ...made }).filter(
    (s) => !options.rows || ['limit', 'bearer', ...options.rows].includes(s.id),
  );
  const peakRss = new Map<string, number | undefined>();
  let pairs: Awaited<ReturnType<typeof measurePairs>> = [];
  if (!options.peersOnly) {
    log('starting one gateway per row');
    await startRows(scenarios, { limit, bearer: main }, (s) => rowGateway(info, s, s.port), log);

    note(`before measuring: ${stack.loadAverage()}`);
    log(
      `measuring: ${options.rounds} rounds of ${options.roundSeconds} s, ${options.connections} connections`,
    );
    await measureScenarios(scenarios, options, log);
    log('paired rounds: each ratio measured with both rows under load at once');
    pairs = await measurePairs(scenarios, [upstream.pid, keycloak.pid], options, log);
    for (const s of scenarios) peakRss.set(s.id, s.pid ? peakRssMiB(s.pid) : undefined);
  }

  if (options.profile) {
    await profile(context, scenarios).catch((err: Error) => {
      note(`CPU profile: not taken: ${err.message}`);
    });
  }

  let sideBySide: SideBySide | undefined;
  if (options.peers) {
    note(`before the side-by-side rows: ${stack.loadAverage()}`);
    sideBySide = await measureSideBySide({
      stack: info,
      organization: 'bench',
      limitPid: limit.pid,
      feederPids: [upstream.pid, keycloak.pid],
      token: made.token,
      options,
      log,
    });
    for (const text of sideBySide.notes) note(text);
  }

  const rows = options.peersOnly ? [] : rowsOf(scenarios, peakRss);
  const targets = options.peersOnly ? [] : judgeTargets(rows, pairs);
  return {
    tables: [
      ...(options.peersOnly ? [] : [formatReport({ rows, targets })]),
      ...(sideBySide ? [formatSideBySide(sideBySide)] : []),
    ],
    report: {
      rows,
      pairs,
      targets,
      sideBySide: sideBySide && { ...sideBySide, targets: judgeSideTargets(sideBySide) },
    },
  };
}

/** A gateway with a row's settings on `port`. */
function rowGateway(info: stack.StackInfo, s: Scenario, port: number, nodeArgs?: string[]) {
  const authOff = s.authOff ? { organization: 'bench', workspace: WORKSPACE } : undefined;
  return stack.startGateway(info, port, { extra: s.extra, authOff, nodeArgs });
}

/** Each `--profile-row` in turn: a fresh gateway of its settings under its load, `--cpu-prof`. */
async function profile({ stack: info, started, note }: BenchContext, scenarios: Scenario[]) {
  for (const row of options.profileRows) {
    const driving = scenarios.find((s) => s.id === row);
    if (!driving) throw new Error(`--profile-row ${row}: no such row in this run`);
    // A folder per row: Node writes a profile per thread (the auth-off row's module hook has
    // a loader thread), named CPU.<date>.<pid>.<thread>.<seq>; the main thread is thread 0.
    const dir = `${DATA_DIR}/profiles/${row}-${new Date(started).toISOString()}`;
    const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
    const profiled = await rowGateway(info, driving, PORTS.profiled, nodeArgs);
    const load = loadOf({ ...driving, port: PORTS.profiled }, options);
    const warmup = { durationSeconds: options.warmupSeconds, amount: driving.warmupAmount };
    await runLoad({ ...load, ...warmup });
    const { reqPerSec } = await runLoad(load);
    await profiled.stop(30_000);
    const file = (await readdir(dir)).find((name) => name.includes(`.${profiled.pid}.0.`));
    const readyAt = String(profiled.ready.monotonicMicros);
    note(
      `CPU profile ${dir}/${file} (${reqPerSec.toFixed(0)} req/s; ready at ${readyAt} µs on its clock)`,
    );
  }
}
