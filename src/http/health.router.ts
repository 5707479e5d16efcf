import { Router } from 'express';
import type { Logger } from 'pino';
import { success, failure } from '../envelope/envelope.ts';
import { errorCodes } from '../envelope/errors.ts';

/** A readiness probe: resolves when the dependency answers, rejects otherwise. */
export type ReadinessCheck = () => Promise<void>;

const CHECK_TIMEOUT_MS = 2000;

/**
 * `GET /healthz`: the process is up. `GET /readyz`: every dependency answered within
 * two seconds; otherwise 503 naming the parts that did not.
 */
export function createHealthRouter(checks: Record<string, ReadinessCheck>, logger: Logger): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json(success({ status: 'up' }));
  });
  router.get('/readyz', async (_req, res) => {
    const names = Object.keys(checks);
    const outcomes = await Promise.all(names.map((name) => runCheck(checks[name]!)));
    const parts = Object.fromEntries(names.map((name, i) => [name, outcomes[i] ? 'up' : 'down']));
    const down = names.filter((_, i) => !outcomes[i]);
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

async function runCheck(check: ReadinessCheck): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([check(), timeout]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
