import { parseArgs } from 'node:util';

/** Ports from BENCH_PORT_BASE (28000): gateways + 0..130, side by side + 140..185, and these. */
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

type Arg = number | string | boolean;
/**
 * The options of every bench script, `--name value` (`--flag` for a boolean), each with its
 * default, which also gives its kind: a number must be a whole number from 1.
 */
export function readArgs<T extends Record<string, Arg>>(argv: string[], defaults: T): T {
  const kind = (v: Arg) => (typeof v === 'boolean' ? 'boolean' : 'string') as 'string';
  const options = Object.fromEntries(
    Object.entries(defaults).map(([k, v]) => [k, { type: kind(v) }]),
  );
  let values: Record<string, Arg | undefined>;
  try {
    values = parseArgs({ args: argv, options }).values;
  } catch (err) {
    // `--help` too: the options and their defaults rather than a stack trace.
    const usage = Object.entries(defaults).map(
      ([k, v]) => `  --${k}${v === false ? '' : ` (${String(v)})`}`,
    );
    const asked = argv.includes('--help');
    (asked ? console.log : console.error)(
      [...(asked ? [] : [(err as Error).message]), 'options (default):', ...usage].join('\n'),
    );
    process.exit(asked ? 0 : 2);
  }
  const read = ([name, fallback]: [string, Arg]) => {
    const given = values[name];
    if (given === undefined || typeof fallback !== 'number') return [name, given ?? fallback];
    const n = Number(given);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number >= 1`);
    return [name, n];
  };
  return Object.fromEntries(Object.entries(defaults).map(read)) as T;
}

export type BenchOptions = ReturnType<typeof parseOptions>;

/** `npm run bench -- --rounds 5 --no-profile` etc. */
export function parseOptions(argv: string[]) {
  const values = readArgs(argv, {
    rounds: 3,
    'round-seconds': 5,
    'warmup-seconds': 2,
    connections: 32,
    tokens: 10000,
    realms: 100,
    'no-profile': false,
    rows: '',
    'profile-row': 'bearer',
    peers: false,
    'peers-only': false,
    fleet: false,
  });
  const { rounds, connections, tokens, realms, fleet } = values;
  return {
    rounds,
    roundSeconds: values['round-seconds'],
    warmupSeconds: values['warmup-seconds'],
    connections,
    tokens,
    realms,
    profile: !values['no-profile'] && !values['peers-only'],
    /** Only these rows (ids, comma-separated) beside the limit and Bearer; default all. */
    rows: values.rows ? values.rows.split(',').filter(Boolean) : undefined,
    /** The rows (ids, comma-separated) each profiled in a gateway of its own (`bearer`...). */
    profileRows: values['profile-row'].split(',').filter(Boolean),
    /** The side-by-side rows (side-by-side.ts) after the others; alone with `--peers-only`. */
    peers: values.peers || values['peers-only'],
    peersOnly: values['peers-only'],
    /** The fleet scenario (fleet-driver.ts) alone, instead of the rows. */
    fleet,
  };
}
