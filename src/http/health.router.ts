import type { Response, Router } from 'express';
import { listenerRouter } from './listener-router.ts';
import type { Logger } from 'pino';
import { success, failure } from '../envelope/envelope.ts';
import { errorCodes } from '../envelope/errors.ts';
import type { BuildInfo } from '../release/build-info.ts';
import { within } from '../time/within.ts';

export type ProbeOutcome = 'up' | 'down' | 'degraded';

/**
 * A dependency's readiness in more words: its outcome; details the admin listener's `/readyz`
 * shows next to it as `{ status, ...details }` (e.g. each Keycloak node); and, when this replica
 * cannot serve its main traffic at all without it, why (`blocks`).
 */
export interface ReadinessReport {
  status: ProbeOutcome;
  details?: Record<string, unknown>;
  blocks?: string;
}

/**
 * A readiness probe: resolves when the dependency answers, rejects or resolves 'down'
 * otherwise. 'degraded' means "answering, but not as configured" (e.g. Redis down, the
 * in-process cache in use).
 */
export type ReadinessCheck = () => Promise<void | ProbeOutcome | ReadinessReport>;

/** How long a readiness check may take; past it, it is `down`. */
export const CHECK_TIMEOUT_MS = 2000;

const timedOut = (): never => {
  throw new Error('timeout');
};

/**
 * `GET /healthz`: the process is up; on the admin listener (`detailed`) with the version and
 * revision it runs, which an operator reads during a rolling upgrade (the public listener does
 * not tell them: they would help someone pick exploits). `GET /readyz`: whether this replica can serve its main
 * traffic (verified tokens, cached logins, organizations it knows), so that a load balancer
 * keeps it while it can:
 * - 200 when every dependency answered within two seconds;
 * - 200 too when one is down or degraded ("Degraded: keycloak."): what needs it answers 503
 *   with Retry-After (new logins, list endpoints), the rest is served;
 * - 503 `503-00001` only for what stops this replica: it is shutting down (`isShuttingDown`,
 *   answered at once), or a check `blocks` (e.g. Keycloak has not answered once since start).
 * Only with `detailed` (the admin listener) are reports' details shown: they name internal
 * addresses.
 */
export function createHealthRouter(
  checks: Record<string, ReadinessCheck>,
  isShuttingDown: () => boolean,
  logger: Logger,
  detailed = false,
  build?: BuildInfo,
): Router {
  const router = listenerRouter();
  const health =
    detailed && build
      ? { status: 'up', version: build.version, revision: build.revision }
      : { status: 'up' };
  router.get('/healthz', (_req, res) => {
    res.setHeader('cache-control', 'no-store');
    res.json(success(health));
  });
  router.get('/readyz', async (_req, res) => {
    // A readiness answer a proxy kept tells a load balancer what was, not what is.
    res.setHeader('cache-control', 'no-store');
    if (isShuttingDown()) {
      notReady(res, 'Not ready: shutting down.', { shutdown: 'in progress' });
      return;
    }
    const names = Object.keys(checks);
    const reports = await Promise.all(names.map((name) => inspect(checks[name]!)));
    const parts = Object.fromEntries(
      names.map((name, i) => {
        const { status, details } = reports[i]!;
        return [name, detailed && details ? { status, ...details } : status];
      }),
    );
    const blocking = reports.flatMap((report) => report.blocks ?? []);
    if (blocking.length > 0) {
      logger.warn({ blocking }, 'not ready');
      notReady(res, `Not ready: ${blocking.join('; ')}.`, parts);
      return;
    }
    const impaired = names.filter((_, i) => reports[i]!.status !== 'up');
    if (impaired.length === 0) {
      res.json(success(parts));
      return;
    }
    res.json({ ...success(parts), message: `Degraded: ${impaired.join(', ')}.` });
  });
  return router;
}

function notReady(res: Response, message: string, data: unknown): void {
  const { status, result } = errorCodes.notReady;
  res
    .status(status)
    .set('retry-after', '5')
    .json(failure(result, message, data));
}

/**
 * `check` shared: callers meanwhile get the run in flight, and for `holdMs` after it succeeded
 * its outcome. The public `/readyz` is unauthenticated; without this each request took a
 * database connection (and a Redis round trip), and a flood of them left the API without
 * connections. A failure is not held: still one run at a time, but the first caller after it
 * asks again, so a dependency that is back shows at once. The run is bounded like a probe, so a
 * hung one does not keep later callers waiting on it; they get its timeout until it settles.
 * Real time, not a Clock: this limits load, and a test's stopped clock would keep an outcome
 * forever.
 */
export function sharedCheck<T>(check: () => Promise<T>, holdMs = 1000): () => Promise<T> {
  let last: Promise<T> | undefined;
  let succeededAt: number | undefined;
  let running = false;
  return () => {
    const fresh =
      last !== undefined &&
      (running || (succeededAt !== undefined && performance.now() - succeededAt < holdMs));
    if (fresh) return last!;
    succeededAt = undefined;
    running = true;
    const inner = Promise.resolve().then(check);
    const run = within(inner, CHECK_TIMEOUT_MS, timedOut);
    last = run;
    // The run's slot stays taken until the check itself settles, not its timeout: else each
    // timed-out caller started one more (a `select 1` each, until the pool was taken).
    const free = () => {
      running = false;
    };
    inner.then(free, free);
    run.then(
      () => (succeededAt = performance.now()),
      () => undefined,
    );
    return run;
  };
}

/** Runs one readiness check, bounded in time; a check that throws or hangs is 'down'. */
export async function probe(check: ReadinessCheck): Promise<ProbeOutcome> {
  return (await inspect(check)).status;
}

/** As `probe`, keeping a check's report. */
async function inspect(check: ReadinessCheck): Promise<ReadinessReport> {
  try {
    const report = (await within(check(), CHECK_TIMEOUT_MS, timedOut)) ?? 'up';
    return typeof report === 'string' ? { status: report } : report;
  } catch {
    return { status: 'down' };
  }
}
