import { parseArgs } from 'node:util';
import { FLEET_DEFAULTS } from './fleet-plan.ts';

/**
 * Ports from BENCH_PORT_BASE (default 28000): gateways at base + 0..130, the side-by-side rows
 * at +140..180, the upstream at +100, the limit proxy at +200, Keycloak at +80 and +1000. The
 * tests use 18000/18001/18080/19000.
 */
const base = Number(process.env.BENCH_PORT_BASE ?? 28000);
export const PORTS = {
  base,
  /** The main Bearer gateway (admin listener +1): Keycloak issues tokens for its address. */
  gateway: base,
  keycloakHttp: base + 80,
  keycloakManagement: base + 1000,
  upstream: base + 100,
  limitProxy: base + 200,
  profiled: base + 190,
};
export const HOST = '127.0.0.1';
export const origin = (port: number) => `http://${HOST}:${port}`;
export const DATA_DIR = '.data/bench';

export type BenchOptions = ReturnType<typeof parseOptions>;

/** `npm run bench -- --rounds 5 --no-profile` etc. */
export function parseOptions(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '3' },
      'round-seconds': { type: 'string', default: '5' },
      'warmup-seconds': { type: 'string', default: '2' },
      connections: { type: 'string', default: '32' },
      tokens: { type: 'string', default: '10000' },
      realms: { type: 'string', default: '100' },
      'no-profile': { type: 'boolean', default: false },
      rows: { type: 'string' },
      'profile-row': { type: 'string', default: 'bearer' },
      peers: { type: 'boolean', default: false },
      'peers-only': { type: 'boolean', default: false },
      fleet: { type: 'boolean', default: false },
      'fleet-hosts': { type: 'string', default: String(FLEET_DEFAULTS.hosts) },
      'fleet-accounts': { type: 'string', default: String(FLEET_DEFAULTS.accounts) },
      'fleet-jobs': { type: 'string', default: String(FLEET_DEFAULTS.jobs) },
      'fleet-waves': { type: 'string', default: String(FLEET_DEFAULTS.waves) },
      'fleet-stale-attempts': { type: 'string', default: String(FLEET_DEFAULTS.staleAttempts) },
    },
  });
  type Flag = 'no-profile' | 'peers' | 'peers-only' | 'fleet' | 'rows' | 'profile-row';
  const int = (name: Exclude<keyof typeof values, Flag>, max = Infinity) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < 1 || n > max) {
      const range = max === Infinity ? '>= 1' : `from 1 to ${max}`;
      throw new Error(`--${name} must be a whole number ${range}`);
    }
    return n;
  };
  return {
    rounds: int('rounds'),
    roundSeconds: int('round-seconds'),
    warmupSeconds: int('warmup-seconds'),
    connections: int('connections'),
    /** Fewer when Keycloak is slow: tokens take 170 s at most, realms 240 s. */
    tokens: int('tokens'),
    realms: int('realms'),
    profile: !values['no-profile'] && !values['peers-only'],
    /** Only these rows (ids, comma-separated) beside the limit and Bearer; default all. */
    rows: values.rows?.split(',').filter(Boolean),
    /** The row whose requests drive the profiled gateway (`bearer`, `dpop`...). */
    profileRow: values['profile-row'],
    /** The side-by-side rows (side-by-side.ts) after the others; alone with `--peers-only`. */
    peers: values.peers || values['peers-only'],
    peersOnly: values['peers-only'],
    /** The fleet scenario (fleet-plan.ts) alone, instead of every other row. */
    fleet: values.fleet
      ? {
          ...FLEET_DEFAULTS,
          // Source addresses 127.0.0.20 to 127.0.0.99.
          hosts: int('fleet-hosts', 80),
          accounts: int('fleet-accounts'),
          jobs: int('fleet-jobs'),
          waves: int('fleet-waves'),
          staleAttempts: int('fleet-stale-attempts'),
        }
      : undefined,
  };
}
