import type { Answer } from './clients.ts';
import type { PhaseLoad } from './measure.ts';

/*
 * The shape of an outage phase (outages.ts): the steady load through HAProxy, a dependency
 * broken a second into it, the outage sampled while the load runs, the dependency repaired
 * 20 s after it broke.
 */

/** How long the dependency stays down. */
export const OUTAGE_MS = 20_000;
/** The load starts this long before the outage, so that it sees the moment things break. */
export const LEAD_MS = 1000;
/** How often the outage is sampled (new logins, list endpoints, each replica's /readyz). */
const SAMPLE_MS = 4000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export interface Sample {
  answers: Answer[];
  readiness: string[];
}

/**
 * With `load` just started: runs `breakIt` a second later, samples the outage with `sample`
 * until the load ends, waits out the 20 s and runs `repair`. Returns the load's outcome, the
 * samples, how long the dependency was down before `repair` began, and when `repair` ended.
 */
export async function outage(
  load: Promise<PhaseLoad>,
  breakIt: () => Promise<void>,
  sample: () => Promise<Sample>,
  repair: () => Promise<void>,
) {
  await sleep(LEAD_MS);
  await breakIt();
  const brokenAt = performance.now();
  const samples: Sample[] = [];
  const done: { load?: PhaseLoad } = {};
  void load.then((loaded) => (done.load = loaded)).catch(() => undefined);
  while (!done.load) {
    samples.push(await sample());
    await Promise.race([load, sleep(SAMPLE_MS)]);
  }
  await sleep(OUTAGE_MS - (performance.now() - brokenAt));
  const repairAt = performance.now();
  await repair();
  const back = performance.now();
  return { loaded: done.load, samples, downMs: Math.round(repairAt - brokenAt), back };
}

/** "503 x5 (Retry-After 5)": how a series of answers went, grouped. */
export function tally(answers: Answer[]): string {
  const counts = new Map<string, number>();
  for (const { status, retryAfter } of answers) {
    const key = `${status} (Retry-After ${retryAfter ?? 'none'})`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, n]) => `${n} x ${key}`).join(', ');
}

export const column = (samples: Sample[], i: number) => samples.map((s) => s.answers[i]!);
export const readiness = (samples: Sample[], i: number) =>
  [...new Set(samples.map((s) => s.readiness[i]))].join(', ');
