import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { GatewaySpec } from './gateway-process.ts';
import { runLoad, type LoadRequest } from './load-spec.ts';
import { summariseProfile } from './profile-summary.ts';
import type { BenchOptions } from './settings.ts';
import { startGatewayProcess } from './stack.ts';

/**
 * A fresh gateway under `node --cpu-prof`, driven like the Bearer row (warm-up, then one round),
 * then stopped so that V8 writes the profile. The summary counts only samples taken after the
 * gateway reported ready, so start-up (module loading, migrations) is left out.
 */
export async function profileGateway(options: {
  spec: GatewaySpec;
  origin: string;
  requests: LoadRequest[];
  dir: string;
  bench: BenchOptions;
}): Promise<{ file: string; summary: string; reqPerSec: number }> {
  await rm(options.dir, { recursive: true, force: true });
  await mkdir(options.dir, { recursive: true });
  const gateway = await startGatewayProcess('profiled gateway', options.spec, [
    '--cpu-prof',
    `--cpu-prof-dir=${options.dir}`,
  ]);
  const load = {
    url: options.origin,
    connections: options.bench.connections,
    requests: options.requests,
  };
  let reqPerSec = 0;
  try {
    await runLoad({ ...load, durationSeconds: options.bench.warmupSeconds });
    reqPerSec = (await runLoad({ ...load, durationSeconds: options.bench.roundSeconds })).reqPerSec;
  } finally {
    await gateway.stop(30_000);
  }
  const files = (await readdir(options.dir)).filter((f) => f.endsWith('.cpuprofile'));
  const file = files[0];
  if (!file) throw new Error(`no .cpuprofile written to ${options.dir}`);
  const readyAtMicros = Number(gateway.ready.monotonicMicros);
  const summary = await summariseProfile(path.join(options.dir, file), {
    fromMicros: Number.isFinite(readyAtMicros) ? readyAtMicros : undefined,
  });
  return { file: path.join(options.dir, file), summary, reqPerSec };
}
