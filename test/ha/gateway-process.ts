import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface GatewayProcess {
  /** Base URL of the public listener. */
  readonly url: string;
  /** Base URL of the admin listener (`/metrics`, `/readyz`). */
  readonly adminUrl: string;
  readonly pid: number;
  /** SIGTERM (the gateway drains), then SIGKILL after 15 s. */
  stop(): Promise<void>;
}

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

/**
 * One gateway replica as production runs it: `node src/main.ts` in a process of its own (its
 * own event loop, not the test's nor the load generator's), configured by `env` alone, its
 * output appended to `logFile`. Resolves once `/readyz` answers 200.
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  logFile: string,
): Promise<GatewayProcess> {
  const log = openSync(logFile, 'a');
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const url = `http://${env.HOST}:${env.PORT}`;
  const adminUrl = `http://${env.ADMIN_HOST}:${env.ADMIN_PORT}`;
  const stop = () => stopChild(child);
  try {
    await waitUntilReady(child, adminUrl, logFile);
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, adminUrl, pid: child.pid!, stop };
}

async function waitUntilReady(child: ChildProcess, adminUrl: string, logFile: string) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`gateway exited with ${child.exitCode} before it was ready; see ${logFile}`);
    }
    const status = await fetch(`${adminUrl}/readyz`, { signal: AbortSignal.timeout(2000) })
      .then((res) => res.status)
      .catch(() => 0);
    if (status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`gateway not ready within 60 s; see ${logFile}`);
}

/** SIGTERM, then SIGKILL if the process has not exited within 15 s; resolves once it has. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
