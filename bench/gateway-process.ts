import { swapInConstantBearer } from './constant-bearer.ts';
import { exitWithParent, reportReady } from './processes.ts';

/**
 * One gateway in a process of its own, configured by the JSON in `BENCH_GATEWAY`
 * (see GatewaySpec). Prints one readiness line on stdout, and closes (writing a CPU profile when
 * started with `--cpu-prof`) on SIGTERM/SIGINT or when the bench's end of stdin closes.
 */
export interface GatewaySpec {
  /**
   * `full`: the real gateway, `startGateway` from src/gateway.ts.
   * `auth-off`: the same `startGateway`, with Bearer verification replaced by a constant
   * principal holding `workspace` in `organization` (see constant-bearer.ts); its env should
   * switch revocation checks off, as the principal has no session to check.
   */
  mode: 'full' | 'auth-off';
  /** The environment `loadConfig` reads (nothing is taken from the bench's own environment). */
  env: Record<string, string>;
  keycloakUrl: string;
  organization?: string;
  workspace?: string;
}

const spec = JSON.parse(process.env.BENCH_GATEWAY ?? '{}') as GatewaySpec;
// The swap must be in place before src/gateway.ts is loaded: src is imported dynamically below.
if (spec.mode === 'auth-off') swapInConstantBearer(spec.organization ?? '', spec.workspace ?? '');

const { loadConfig } = await import('../src/config/config.ts');
const { startGateway } = await import('../src/gateway.ts');
const { createLogger } = await import('../src/http/logger.ts');

const config = loadConfig(spec.env);
const gateway = await startGateway(config, spec.keycloakUrl, createLogger(config.LOG_LEVEL));
// The monotonic clock of CPU profiles: lets a profile summary leave start-up out.
reportReady({
  mode: spec.mode,
  port: config.PORT,
  monotonicMicros: Number(process.hrtime.bigint() / 1000n),
});
exitWithParent(() => gateway.close());
