import { cpus } from 'node:os';
import type { Knex } from 'knex';
import type { LocalKeycloak } from '../keycloak/launcher.ts';
import { openDatabase } from '../src/db/database.ts';
import { stopAllChildren } from './processes.ts';
import { writeReport } from './report.ts';
import { DATA_DIR, PORTS, type BenchOptions } from './settings.ts';
import * as stack from './stack.ts';

/** The harness every mode of `npm run bench` runs in (README.md, "What runs, and how"). */
export interface BenchContext {
  options: BenchOptions;
  stack: stack.StackInfo;
  keycloak: LocalKeycloak;
  started: number;
  log: (text: string) => void;
  /** Logged, and kept in the report and under its tables. */
  note: (text: string) => void;
  /** The platform database (once a gateway migrated it). */
  openDatabase: () => Promise<Knex>;
}
/** What a mode measured: its Markdown tables, and what goes into the report file. */
export interface ModeResult {
  tables: string[];
  report: Record<string, unknown>;
}

export async function runBench(
  options: BenchOptions,
  mode: (context: BenchContext) => Promise<ModeResult>,
): Promise<void> {
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
    const connect = async () => (db ??= await openDatabase({ databaseUrl, dataDir: DATA_DIR }));
    const context = { options, stack: info, keycloak: kc, started, log, note };
    const result = await mode({ ...context, openDatabase: connect });

    const sourceAtEnd = await stack.sourceFingerprint();
    note(`at the end: ${stack.loadAverage()}`);
    notes.push(
      sourceAtEnd === sourceAtStart
        ? `src/ fingerprint ${sourceAtStart}, unchanged during the run`
        : `src/ CHANGED during the run (${sourceAtStart} → ${sourceAtEnd}): rows may run other code`,
    );
    const file = await writeReport({
      startedAt: new Date(started).toISOString(),
      finishedAt: new Date().toISOString(),
      machine: { cpus: cpus().length, node: process.version },
      options,
      ...result.report,
      notes,
    });
    const tables = result.tables.map((table) => `\n${table}\n`).join('');
    console.log(`${tables}\n${notes.map((text) => `note: ${text}`).join('\n')}`);
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
}
