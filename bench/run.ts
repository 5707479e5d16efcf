import { cpus } from 'node:os';
import type { Knex } from 'knex';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { openDatabase } from '../src/db/database.ts';
import { stopAllChildren } from './processes.ts';
import { formatExtras, formatTable, rowsOf, writeReport, type BenchReport } from './report.ts';
import { DATA_DIR, parseOptions, RESULTS_DIR } from './settings.ts';
import { runBench } from './bench.ts';
import { newSecrets, prepareDatabase, sourceFingerprint, startBenchKeycloak } from './stack.ts';
import { judgeTargets } from './targets.ts';

/**
 * `npm run bench`: starts Keycloak, the upstream, the limit proxy and the gateways, measures
 * every scenario, prints one table and writes bench/results/<timestamp>.json. Everything it
 * started is stopped at the end, on error and on Ctrl-C.
 */
const options = parseOptions(process.argv.slice(2));
const started = Date.now();
const log = (message: string) =>
  console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)} s] ${message}`);

let keycloak: LocalKeycloak | undefined;
let db: Knex | undefined;
let cleaning: Promise<void> | undefined;
let interrupted = false;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAllChildren();
    await db?.destroy().catch(() => undefined);
    await keycloak?.stop();
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    log(`${signal}: stopping everything the bench started`);
    void cleanup().finally(() => process.exit(130));
  });
}

try {
  const startedAt = new Date(started).toISOString();
  const sourceAtStart = await sourceFingerprint();
  const secrets = newSecrets();
  log('starting Keycloak (fresh state) and preparing the database');
  const [kc, databaseUrl] = await Promise.all([
    startBenchKeycloak(secrets, (m) => log(m)),
    prepareDatabase(),
  ]);
  keycloak = kc;
  const outcome = await runBench({
    options,
    secrets,
    keycloakUrl: kc.url,
    keycloakPid: kc.pid,
    databaseUrl,
    log,
    openDb: async () => (db = await openDatabase({ databaseUrl, dataDir: DATA_DIR })),
  });
  const rows = rowsOf(outcome.runs);
  const sourceAtEnd = await sourceFingerprint();
  outcome.notes.push(
    sourceAtEnd === sourceAtStart
      ? `src/ fingerprint ${sourceAtStart}, unchanged during the run`
      : `src/ CHANGED during the run (${sourceAtStart} → ${sourceAtEnd}): gateways started at ` +
          'different times may run different code',
  );
  const report: BenchReport = {
    startedAt,
    finishedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version, platform: process.platform },
    options: { ...options },
    rows,
    pairs: outcome.pairs,
    halfLoad: outcome.halfLoad,
    bursts: outcome.bursts,
    memory: outcome.memory,
    targets: judgeTargets(rows, outcome.pairs, outcome.halfLoad, outcome.bursts),
    profile: outcome.profile,
    notes: outcome.notes,
  };
  const file = await writeReport(RESULTS_DIR, report);
  console.log(`\n${formatTable(rows)}\n\n${formatExtras(report)}\n`);
  if (report.profile) console.log(`${report.profile.summary}\n`);
  for (const note of report.notes) console.log(`note: ${note}`);
  console.log(`\nresults: ${file}`);
} catch (err) {
  // After Ctrl-C the load generator dies with the same signal: that is no failure to report.
  if (!interrupted) log(`failed: ${(err as Error).stack ?? String(err)}`);
  process.exitCode = 1;
} finally {
  log('stopping everything');
  await cleanup();
  log('done');
}
