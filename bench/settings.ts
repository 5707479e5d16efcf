import { parseArgs } from 'node:util';

/** Every address the bench uses: 28xxx and 29000, apart from the 18xxx ports of the tests. */
export const PORTS = {
  gateway: 28000,
  gatewayAdmin: 28001,
  keycloakHttp: 28080,
  keycloakManagement: 29000,
  upstream: 28100,
  limitProxy: 28200,
  /** One gateway per row (public listener; admin listener = port + 1). */
  authOff: 28010,
  basicNoCache: 28020,
  manyTokens: 28030,
  manyRealms: 28040,
  introspectEach: 28050,
  revocationOff: 28060,
  profiled: 28070,
  bearerControl: 28110,
  basicWarm: 28120,
  list: 28130,
  manyTokensRevocationOff: 28140,
} as const;

export const HOST = '127.0.0.1';
export const PUBLIC_URL = `http://${HOST}:${PORTS.gateway}`;
export const ADMIN_PUBLIC_URL = `http://${HOST}:${PORTS.gatewayAdmin}`;
export const DATA_DIR = '.data/bench';
export const RESULTS_DIR = 'bench/results';

export interface BenchOptions {
  rounds: number;
  roundSeconds: number;
  warmupSeconds: number;
  connections: number;
  /** Distinct Bearer tokens wanted for the many-tokens scenario. */
  tokens: number;
  /** Seconds allowed for obtaining them (refresh grants); fewer are used when it runs out. */
  tokenBudgetSeconds: number;
  /** Organization realms wanted for the many-realms scenario. */
  realms: number;
  realmBudgetSeconds: number;
  burstSize: number;
  bursts: number;
  /** Whether to run the CPU-profiled Bearer pass at the end. */
  profile: boolean;
}

/** `npm run bench -- --rounds 5 --realms 20 --no-profile` etc. */
export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '3' },
      'round-seconds': { type: 'string', default: '5' },
      'warmup-seconds': { type: 'string', default: '2' },
      connections: { type: 'string', default: '32' },
      tokens: { type: 'string', default: '10000' },
      'token-budget-seconds': { type: 'string', default: '170' },
      realms: { type: 'string', default: '100' },
      'realm-budget-seconds': { type: 'string', default: '240' },
      'burst-size': { type: 'string', default: '200' },
      bursts: { type: 'string', default: '3' },
      'no-profile': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (name: string, value: string, min: number) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
  };
  return {
    rounds: int('rounds', values.rounds, 1),
    roundSeconds: int('round-seconds', values['round-seconds'], 1),
    warmupSeconds: int('warmup-seconds', values['warmup-seconds'], 0),
    connections: int('connections', values.connections, 1),
    tokens: int('tokens', values.tokens, 1),
    tokenBudgetSeconds: int('token-budget-seconds', values['token-budget-seconds'], 1),
    realms: int('realms', values.realms, 1),
    realmBudgetSeconds: int('realm-budget-seconds', values['realm-budget-seconds'], 1),
    burstSize: int('burst-size', values['burst-size'], 1),
    bursts: int('bursts', values.bursts, 0),
    profile: !values['no-profile'],
  };
}
