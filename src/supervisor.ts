import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { createIpcHub } from './cache/ipc-hub.ts';
import { CALL_TIMEOUT_MS, type IpcPeer } from './cache/ipc-peer.ts';
import type { Config } from './config/config.ts';
import type { SchemaState } from './db/migrate-at-start.ts';
import { SCHEMA_IPC, serveSchema } from './db/supervisor-schema.ts';
import { createWorkerMetrics } from './metrics/worker-metrics.ts';
import { systemClock, type Clock } from './time/clock.ts';

/** The environment variable that gives a worker its number, 1 to WORKERS. */
export const WORKER_ID_VARIABLE = 'REALMGATE_WORKER';

/** A worker that dies is started again after this, doubling while it keeps dying young. */
const FIRST_RESTART_DELAY_MS = 250;
const MAX_RESTART_DELAY_MS = 30_000;
/** A worker that lived this long died of something new: its next restart waits the least again. */
const HEALTHY_LIFETIME_MS = 60_000;
/**
 * How long a scrape waits for each worker's metrics. Shorter than the asking worker's own wait
 * for the aggregate (CALL_TIMEOUT_MS): a hung worker is left out, not the whole scrape failed.
 */
const WORKER_METRICS_TIMEOUT_MS = CALL_TIMEOUT_MS / 2;

export interface Supervisor {
  /** Drains every worker (each its own graceful close, at once) and resolves once all exited. */
  stop(): Promise<void>;
  /** Ends every worker at once (a second signal). */
  kill(): void;
}

/**
 * The supervising process of a gateway that runs WORKERS processes (node:cluster: this process
 * accepts the connections and hands them to the workers in turn). It starts the workers with
 * `env` (the Keycloak it started, the cache secret they share), resolves once each listens,
 * starts again one that dies (after a delay that doubles while it keeps dying, logged and counted
 * in `realmgate_worker_restarts_total`), and serves them over IPC: the shared cache and replica
 * bus without Redis (cache/ipc-hub.ts), `/metrics` aggregated across all of them, and the state
 * of `schema`, which this process migrates (db/supervisor-schema.ts).
 */
export async function superviseWorkers(options: {
  config: Config;
  env: Record<string, string>;
  logger: Logger;
  schema: SchemaState;
  clock?: Clock;
}): Promise<Supervisor> {
  const { config, logger, schema, clock = systemClock } = options;
  const hub = createIpcHub({ maxEntries: config.MEMORY_CACHE_MAX_ENTRIES, clock });
  const metrics = createWorkerMetrics();
  let stopping = false;
  const workers = new Map<number, Worker>();
  const peers = new Map<number, IpcPeer>();
  /** A worker's metrics; undefined while it is not running, or when it did not answer in time. */
  const metricsOf = async (slot: number) =>
    peers
      .get(slot)
      ?.callWithin<Parameters<typeof metrics.render>[0][number]>(
        WORKER_METRICS_TIMEOUT_MS,
        'metrics',
      )
      .catch(() => undefined);
  const renderMetrics = async () => {
    const slots = Array.from({ length: config.WORKERS }, (_, i) => i + 1);
    const lists = await Promise.all(slots.map(metricsOf));
    const up = Object.fromEntries(slots.map((slot, i) => [slot, lists[i] !== undefined]));
    return metrics.render(
      lists.filter((list) => list !== undefined),
      up,
    );
  };
  const restarts = new Map<number, number>();

  const start = (slot: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const startedAt = clock.now();
      const worker = cluster.fork({ ...options.env, [WORKER_ID_VARIABLE]: String(slot) });
      workers.set(slot, worker);
      const peer: IpcPeer = hub.attach(worker);
      peers.set(slot, peer);
      peer.serve('metrics.cluster', renderMetrics);
      serveSchema(peer, schema);
      peer.serve('worker.ready', () => {
        logger.info({ worker: slot, pid: worker.process.pid }, 'worker ready');
        resolve();
      });
      worker.once('exit', (code: number | null, signal: string | null) => {
        workers.delete(slot);
        peers.delete(slot);
        reject(new Error(`worker ${slot} exited (${signal ?? code}) before it was ready`));
        if (stopping) return;
        const young = clock.now() - startedAt < HEALTHY_LIFETIME_MS;
        const failures = young ? (restarts.get(slot) ?? 0) + 1 : 1;
        restarts.set(slot, failures);
        const delayMs = Math.min(
          FIRST_RESTART_DELAY_MS * 2 ** (failures - 1),
          MAX_RESTART_DELAY_MS,
        );
        logger.error(
          { worker: slot, pid: worker.process.pid, code, signal, restartInMs: delayMs },
          'worker died: starting it again',
        );
        metrics.restarted();
        setTimeout(() => {
          if (!stopping)
            start(slot).catch((err: unknown) => logger.error({ err }, 'restart failed'));
        }, delayMs).unref();
      });
    });

  const stop = async () => {
    stopping = true;
    const exited = [...workers.values()].map(
      (worker) => new Promise<void>((resolve) => worker.once('exit', () => resolve())),
    );
    // Every worker at once: each answers /readyz 503 and drains within SHUTDOWN_GRACE_SECONDS.
    for (const worker of workers.values()) worker.process.kill('SIGTERM');
    const force = setTimeout(
      () => workers.forEach((worker) => worker.process.kill('SIGKILL')),
      config.SHUTDOWN_GRACE_SECONDS * 1000 + 5000,
    );
    await Promise.all(exited);
    clearTimeout(force);
    await hub.close();
  };

  // Workers started while this process migrates in the background hold their queries until then.
  schema.ready.then(
    () => hub.peers.forEach((peer) => peer.tell(SCHEMA_IPC.migrated)),
    () => undefined,
  );
  try {
    await Promise.all(Array.from({ length: config.WORKERS }, (_, i) => start(i + 1)));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    stop,
    kill: () => workers.forEach((worker) => worker.process.kill('SIGKILL')),
  };
}
