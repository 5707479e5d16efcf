import { Router } from 'express';
import type { Logger } from 'pino';
import { success, failure } from '../envelope/envelope.ts';
import { errorCodes } from '../envelope/errors.ts';

export type ProbeOutcome = 'up' | 'down' | 'degraded';

/**
 * A dependency made of parts (e.g. several Keycloak nodes): its outcome, and details the admin
 * listener's `/readyz` shows next to it as `{ status, ...details }`.
 */
export interface ReadinessReport {
  status: ProbeOutcome;
  details: Record<string, unknown>;
}

/**
 * A readiness probe: resolves when the dependency answers, rejects otherwise. Resolving with
 * 'degraded' means "serving, but not as configured" (e.g. Redis down, in-process cache in use):
 * shown, but not a reason to take the gateway out of rotation. A report says so itself.
 */
export type ReadinessCheck = () => Promise<void | 'degraded' | ReadinessReport>;

const CHECK_TIMEOUT_MS = 2000;

/**
 * `GET /healthz`: the process is up. `GET /readyz`: every dependency answered within
 * two seconds; otherwise 503 naming the parts that did not. From the moment the gateway starts
 * shutting down (`isShuttingDown`), 503 at once, so a load balancer stops sending traffic.
 * Only with `detailed` (the admin listener) are reports' details shown: they name internal
 * addresses.
 */
export function createHealthRouter(
  checks: Record<string, ReadinessCheck>,
  isShuttingDown: () => boolean,
  logger: Logger,
  detailed = false,
): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json(success({ status: 'up' }));
  });
  router.get('/readyz', async (_req, res) => {
    if (isShuttingDown()) {
      const { status, result } = errorCodes.notReady;
      res
        .status(status)
        .set('retry-after', '5')
        .json(failure(result, 'Not ready: shutting down.', { shutdown: 'in progress' }));
      return;
    }
    const names = Object.keys(checks);
    const reports = await Promise.all(names.map((name) => inspect(checks[name]!)));
    const parts = Object.fromEntries(
      names.map((name, i) => {
        const report = reports[i]!;
        if (typeof report === 'string') return [name, report];
        return [name, detailed ? { status: report.status, ...report.details } : report.status];
      }),
    );
    const outcomes = reports.map((report) => (typeof report === 'string' ? report : report.status));
    const down = names.filter((_, i) => outcomes[i] === 'down');
    if (down.length === 0) {
      res.json(success(parts));
      return;
    }
    logger.warn({ down }, 'not ready');
    const { status, result } = errorCodes.notReady;
    res
      .status(status)
      .set('retry-after', '5')
      .json(failure(result, `Not ready: ${down.join(', ')}.`, parts));
  });
  return router;
}

/** Runs one readiness check, bounded in time; a check that throws or hangs is 'down'. */
export async function probe(check: ReadinessCheck): Promise<ProbeOutcome> {
  const report = await inspect(check);
  return typeof report === 'string' ? report : report.status;
}

/** As `probe`, keeping a check's report. */
async function inspect(check: ReadinessCheck): Promise<ProbeOutcome | ReadinessReport> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
  });
  try {
    return (await Promise.race([check(), timeout])) ?? 'up';
  } catch {
    return 'down';
  } finally {
    clearTimeout(timer);
  }
}
