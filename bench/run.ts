import { cpus } from 'node:os';
import type { Knex } from 'knex';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { openDatabase } from '../src/db/database.ts';
import { createProvisioner, provision, WORKSPACE } from './fixtures.ts';
import { runLoad } from './load.ts';
import { measurePairs } from './pairs.ts';
import { peakRssMiB, stopAllChildren } from './processes.ts';
import { formatReport, judgeTargets, rowsOf, writeReport } from './report.ts';
import { buildScenarios, loadOf, measureScenarios } from './scenarios.ts';
import { measureSideBySide, type SideBySide } from './side-by-side.ts';
import { formatSideBySide, judgeSideTargets } from './side-by-side-report.ts';
import { DATA_DIR, parseOptions, PORTS } from './settings.ts';
import * as stack from './stack.ts';

/**
 * `npm run bench`: Keycloak, the upstream, the limit proxy and one gateway per row; every row
 * measured, then the paired ratios; with `--peers` then the side-by-side rows (realmgate's
 * workers beside Apache and HAProxy); the report on stdout and in bench/results/. Everything
 * it started stops at the end, on error and on Ctrl-C.
 */
const options = parseOptions(process.argv.slice(2));
const started = Date.now();
const seconds = (since: number) => ((Date.now() - since) / 1000).toFixed(0);
const log = (text: string) => console.error(`[bench ${seconds(started).padStart(4)} s] ${text}`);
const notes: string[] = [];
const note = (text: string) => log(notes[notes.push(text) - 1]!);

let keycloak: LocalKeycloak | undefined;
let db: Knex | undefined;
let cleaning: Promise<void> | undefined;
let interrupted = false;
const cleanup = () =>
  (cleaning ??= (async () => {
    await stopAllChildren();
    await db?.destroy().catch(() => undefined);
    await keycloak?.stop();
  })());
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    log(`${signal}: stopping everything the bench started`);
    void cleanup().finally(() => process.exit(130));
  });
}

try {
  const sourceAtStart = await stack.sourceFingerprint();
  const secrets = stack.newSecrets();
  log(`starting Keycloak (fresh state, port ${PORTS.keycloakHttp}) and the database`);
  const [kc, databaseUrl] = await Promise.all([
    stack.startBenchKeycloak(secrets, log),
    stack.prepareDatabase(),
  ]);
  keycloak = kc;
  const info = { secrets, keycloakUrl: kc.url, databaseUrl };
  log('starting the upstream, the limit proxy and the main gateway (it migrates the database)');
  const [[upstream, limit], main] = await Promise.all([
    stack.startServers(),
    stack.startGateway(info, PORTS.gateway),
  ]);

  log('provisioning users, tokens and organizations');
  db = await openDatabase({ databaseUrl, dataDir: DATA_DIR });
  const since = Date.now();
  const provisioner = createProvisioner(kc.url, secrets, db);
  // The side-by-side rows alone need one token.
  const [tokens, realms] = options.peersOnly ? [1, 0] : [options.tokens, options.realms];
  const made = await provision(provisioner, 'bench', tokens, realms);
  note(
    `${made.manyTokens.length} tokens, ${made.realms.length} organizations in ${seconds(since)} s`,
  );
  const node20 = stack.findNode20();
  const scenarios = buildScenarios({ organization: 'bench', node20, ...made });
  const peakRss = new Map<string, number | undefined>();
  let pairs: Awaited<ReturnType<typeof measurePairs>> = [];
  if (!options.peersOnly) {
    log('starting one gateway per row');
    const authOff = { organization: 'bench', workspace: WORKSPACE };
    const children = await Promise.all(
      scenarios.map(async (s) => {
        if (s.id === 'limit' || s.id === 'bearer') return s.id === 'limit' ? limit : main;
        if (s.unavailable) return undefined;
        const how = {
          extra: s.extra,
          runtime: s.runtime,
          authOff: s.authOff ? authOff : undefined,
        };
        return stack.startGateway(info, s.port, how);
      }),
    );
    scenarios.forEach((s, i) => (s.pid = children[i]?.pid));

    note(`before measuring: ${stack.loadAverage()}`);
    log(
      `measuring: ${options.rounds} rounds of ${options.roundSeconds} s, ${options.connections} connections`,
    );
    await measureScenarios(scenarios, options, log);
    log('paired rounds: each ratio measured with both rows under load at once');
    pairs = await measurePairs(scenarios, [upstream.pid, kc.pid], options, log);
    for (const s of scenarios) peakRss.set(s.id, s.pid ? peakRssMiB(s.pid) : undefined);
  }

  if (options.profile) {
    // A fresh gateway under the Bearer load; V8 writes the profile when it exits.
    const file = `${DATA_DIR}/profiles/bearer-${new Date(started).toISOString()}.cpuprofile`;
    const nodeArgs = [
      '--cpu-prof',
      `--cpu-prof-dir=${DATA_DIR}/profiles`,
      `--cpu-prof-name=${file.split('/').pop()}`,
    ];
    const profiled = await stack.startGateway(info, PORTS.profiled, { nodeArgs });
    const bearer = scenarios.find((s) => s.id === 'bearer')!;
    const load = loadOf({ ...bearer, port: PORTS.profiled }, options);
    await runLoad({ ...load, durationSeconds: options.warmupSeconds });
    const { reqPerSec } = await runLoad(load);
    await profiled.stop(30_000);
    const readyAt = String(profiled.ready.monotonicMicros);
    note(
      `CPU profile ${file} (${reqPerSec.toFixed(0)} req/s; ready at ${readyAt} µs on its clock)`,
    );
  }

  let sideBySide: SideBySide | undefined;
  if (options.peers) {
    note(`before the side-by-side rows: ${stack.loadAverage()}`);
    sideBySide = await measureSideBySide({
      stack: info,
      organization: 'bench',
      limitPid: limit.pid,
      feederPids: [upstream.pid, kc.pid],
      newToken: async () => (await provisioner.passwordGrant(made.bearerUser)).accessToken,
      options,
      log,
    });
    for (const text of sideBySide.notes) note(text);
  }

  const sourceAtEnd = await stack.sourceFingerprint();
  note(`at the end: ${stack.loadAverage()}`);
  notes.push(
    sourceAtEnd === sourceAtStart
      ? `src/ fingerprint ${sourceAtStart}, unchanged during the run`
      : `src/ CHANGED during the run (${sourceAtStart} → ${sourceAtEnd}): rows may run other code`,
  );
  const rows = options.peersOnly ? [] : rowsOf(scenarios, peakRss);
  const report = {
    startedAt: new Date(started).toISOString(),
    finishedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, node20: node20?.version },
    options,
    rows,
    pairs,
    targets: options.peersOnly ? [] : judgeTargets(rows, pairs),
    sideBySide: sideBySide && { ...sideBySide, targets: judgeSideTargets(sideBySide) },
    notes,
  };
  const file = await writeReport(report);
  const tables = [
    options.peersOnly ? '' : `\n${formatReport(report)}\n`,
    sideBySide ? `\n${formatSideBySide(sideBySide)}\n` : '',
  ];
  console.log(`${tables.join('')}\n${notes.map((text) => `note: ${text}`).join('\n')}`);
  console.log(`\nresults: ${file}`);
} catch (err) {
  // After Ctrl-C the load generator dies with the same signal: no failure to report.
  if (!interrupted) log(`failed: ${(err as Error).stack ?? String(err)}`);
  process.exitCode = 1;
} finally {
  log('stopping everything');
  await cleanup();
  log('done');
}
