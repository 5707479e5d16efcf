import { swapInConstantBearer } from './constant-bearer.ts';
import { readyUntilParentExits } from './processes.ts';

/** One gateway (src/gateway.ts `startGateway`) in a process of its own, as `BENCH_GATEWAY` says. */
export interface GatewaySpec {
  env: Record<string, string>;
  keycloakUrl: string;
  /** Auth off: Bearer verification replaced by a constant principal holding this workspace. */
  authOff?: { organization: string; workspace: string };
}

const spec = JSON.parse(process.env.BENCH_GATEWAY ?? '{}') as GatewaySpec;
// The swap must be in place before src/gateway.ts is loaded, hence the dynamic imports.
if (spec.authOff) swapInConstantBearer(spec.authOff.organization, spec.authOff.workspace);

const { loadConfig } = await import('../src/config/config.ts');
const { startGateway } = await import('../src/gateway.ts');
const { createLogger } = await import('../src/http/logger.ts');

const config = loadConfig(spec.env);
const gateway = await startGateway(config, spec.keycloakUrl, createLogger(config.LOG_LEVEL));
// On the monotonic clock of CPU profiles: lets the profile summary leave start-up out.
readyUntilParentExits({ monotonicMicros: Number(process.hrtime.bigint() / 1000n) }, () =>
  gateway.close(),
);
