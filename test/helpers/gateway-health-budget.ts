import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configSchema } from '../../src/config/config.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A service's `healthcheck` as compose and stack files write it. */
export interface ServiceHealthcheck {
  interval?: string;
  retries?: number;
  start_period?: string;
}

/** `1m30s`, `300s`, `500ms` in seconds. */
function seconds(duration: string): number {
  let total = 0;
  for (const [, amount, unit] of duration.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g))
    total += Number(amount) * { h: 3600, m: 60, s: 1, ms: 0.001 }[unit as 'h' | 'm' | 's' | 'ms'];
  return total;
}

/** The Dockerfile's HEALTHCHECK options, e.g. `{ interval: '10s', retries: 3, start_period: '30s' }`. */
function imageHealthcheck(): ServiceHealthcheck {
  const text = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  const line = /^HEALTHCHECK (.*)$/m.exec(text)![1]!;
  const option = (name: string) => new RegExp(`--${name}=(\\S+)`).exec(line)?.[1];
  const retries = option('retries');
  return {
    interval: option('interval'),
    retries: retries === undefined ? undefined : Number(retries),
    start_period: option('start-period'),
  };
}

/**
 * Seconds Docker lets a gateway container go without answering its health check before it
 * calls it unhealthy (which Swarm replaces): the start period, then `retries` failed checks
 * `interval` apart. Each field the service leaves out is the image's (the engine merges them one
 * by one), and Docker's default where neither says (30 s, 3, none).
 */
export function healthBudgetSeconds(service: ServiceHealthcheck | undefined): number {
  const image = imageHealthcheck();
  const interval = service?.interval ?? image.interval ?? '30s';
  const retries = service?.retries ?? image.retries ?? 3;
  const startPeriod = service?.start_period ?? image.start_period ?? '0s';
  return seconds(startPeriod) + seconds(interval) * retries;
}

/**
 * The longest a start's migration may take per statement, `DATABASE_SPARED_TIMEOUT_MS`'s
 * default, in seconds: a replica listens only after it.
 */
export const migrationStatementSeconds =
  configSchema.shape.DATABASE_SPARED_TIMEOUT_MS.parse(undefined) / 1000;
