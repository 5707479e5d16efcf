import type { JsonWebKey } from 'node:crypto';
import { WORKSPACE, type BenchUser, type provision } from './fixtures.ts';
import { runLoad, type LoadRequest, type LoadResult, type LoadSpec } from './load.ts';
import { origin, PORTS, type BenchOptions } from './settings.ts';

/** One row of the table: what serves it, the requests sent to it, and its measured rounds. */
export interface Scenario {
  id: string;
  name: string;
  requests: LoadRequest[];
  /** The settings of this row's gateway; auth off: constant-bearer.ts. */
  extra?: Record<string, string>;
  authOff?: boolean;
  /** Warm up with this many requests (a pass over every token or user), not for a time. */
  warmupAmount?: number;
  /** Every request reaches Keycloak: measured last, as Keycloak stays busy after. */
  keycloakBound?: boolean;
  unavailable?: string;
  port: number;
  pid?: number;
  rounds: LoadResult[];
}

export function automationPath(organization: string): string {
  return `/api/${organization}/workspaces/${WORKSPACE}/ita/menu/operation_list/filter/`;
}

/**
 * A bound token's request, with a fresh proof each time (load.ts) for the URL as the client
 * addresses it: PUBLIC_URL, the main gateway's address for every gateway of the bench.
 */
export function dpopRequest(path: string, grant: { key: JsonWebKey; accessToken: string }) {
  const { key: privateJwk, accessToken } = grant;
  const dpop = { privateJwk, method: 'GET', htu: `${origin(PORTS.gateway)}${path}`, accessToken };
  return { path, authorization: `DPoP ${accessToken}`, dpop };
}

/**
 * The rows, in the order printed; every row but the limit has a gateway process of its own, so
 * no row inherits another's JIT or heap state. The reference rows get the very request the
 * Bearer row sends (a ~1.4 KB header to parse and forward), so that rows differ only in what
 * serves them. Many credentials go in turn (load.ts): no two concurrent requests carry the same.
 */
export function buildScenarios(
  input: Awaited<ReturnType<typeof provision>> & { organization: string },
): Scenario[] {
  const { realms, manyTokens, noCacheUsers } = input;
  const path = automationPath(input.organization);
  const bearer = [{ path, authorization: `Bearer ${input.token}` }];
  const rotate = (tokens: string[]) => tokens.map((t) => ({ path, authorization: `Bearer ${t}` }));
  const dpop = [dpopRequest(path, input.dpop)];
  const basic = (u: BenchUser) => {
    const credentials = Buffer.from(`${u.username}:${u.password}`).toString('base64');
    return { path, authorization: `Basic ${credentials}` };
  };
  // The trivial upstream answers the exports (200, a JSON body) like any request.
  const sink = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${origin(PORTS.upstream)}/v1/traces` };
  // The rows that send Bearer's very request, each to a gateway of its own settings.
  const alike = (id: string, name: string, extra?: Record<string, string>) =>
    ({ id, name, requests: bearer, extra }) as const;
  const rows: Omit<Scenario, 'port' | 'rounds'>[] = [
    alike('limit', 'limit: minimal node:http proxy'),
    {
      ...alike('auth-off', 'auth off: same gateway, verification replaced by a constant principal'),
      authOff: true,
      extra: { REVOCATION_CHECK_SECONDS: 'off' },
    },
    alike('bearer', 'Bearer, 1 token (defaults)'),
    alike('bearer-control', 'Bearer, a second identical gateway (control)'),
    { id: 'dpop', name: 'DPoP, a token bound to a key, a fresh proof per request', requests: dpop },
    alike('bearer-metrics-off', 'Bearer, metrics off (METRICS_ENABLED=false)', {
      METRICS_ENABLED: 'false',
    }),
    alike(
      'bearer-tracing',
      'Bearer, tracing on (every request traced, OTLP/HTTP to a local sink)',
      sink,
    ),
    {
      id: 'bearer-10k',
      name: `Bearer, ${manyTokens.length} distinct tokens`,
      requests: rotate(manyTokens),
      warmupAmount: manyTokens.length,
    },
    {
      id: 'bearer-realms',
      name: `Bearer, ${realms.length} realms × 1 token`,
      requests: realms.map((r) => ({
        path: automationPath(r.realm),
        authorization: `Bearer ${r.token}`,
      })),
    },
    { id: 'basic-warm', name: 'Basic, warm cache', requests: [basic(input.basicUser)] },
    {
      id: 'basic-nocache',
      name: `Basic, cache off, ${noCacheUsers.length} users: a password grant per request`,
      requests: noCacheUsers.map(basic),
      extra: { BASIC_CACHE_MAX_SECONDS: '0' },
      // One grant per user: a grant can take longer than a timed warm-up on a busy machine.
      warmupAmount: noCacheUsers.length,
      keycloakBound: true,
    },
  ];
  // The main Bearer gateway on the base port (Keycloak issues tokens for its address), the
  // limit proxy on its own, the others every 10 ports, around Keycloak's and the upstream's.
  const free = [10, 20, 30, 40, 50, 60, 70, 110, 120].map((o) => PORTS.base + o);
  return rows.map((row) => ({
    ...row,
    port: { limit: PORTS.limitProxy, bearer: PORTS.gateway }[row.id] ?? free.shift()!,
    rounds: [],
  }));
}

/** Starts each row's process (unless `started`); one that does not start says why in its row. */
export async function startRows(
  scenarios: Scenario[],
  started: Record<string, { pid: number }>,
  start: (s: Scenario) => Promise<{ pid: number }>,
  log: (message: string) => void,
): Promise<void> {
  await Promise.all(
    scenarios.map(async (s) => {
      if (s.unavailable) return;
      try {
        s.pid = (started[s.id] ?? (await start(s))).pid;
      } catch (err) {
        s.unavailable = `did not start: ${(err as Error).message}`;
        log(`  ${s.name}: ${s.unavailable}`);
      }
    }),
  );
}

/**
 * Warm-up, then rounds interleaved across rows (README.md), the Keycloak-bound rows last; a
 * row without a 2xx answer in its warm-up is left out.
 */
export async function measureScenarios(
  scenarios: Scenario[],
  options: BenchOptions,
  log: (message: string) => void,
) {
  for (const bound of [false, true]) {
    const group = scenarios.filter((s) => !s.unavailable && Boolean(s.keycloakBound) === bound);
    for (const s of group) {
      const warmup = await runLoad({
        ...loadOf(s, options, options.warmupSeconds),
        amount: s.warmupAmount,
      });
      if (warmup.ok > 0) continue;
      s.unavailable = `no 2xx answer in the warm-up: ${JSON.stringify(warmup.statusCodes)}`;
      log(`  ${s.name}: ${s.unavailable}`);
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const s of group.filter((row) => !row.unavailable)) {
        const r = await runLoad(loadOf(s, options));
        s.rounds.push(r);
        const bad = r.bad ? ` (not 2xx: ${r.bad}, ${JSON.stringify(r.statusCodes)})` : '';
        log(`  round ${round}/${options.rounds} ${s.name}: ${r.reqPerSec.toFixed(0)} req/s${bad}`);
      }
    }
  }
}

/** A round of a row: its requests, the usual connections. */
export function loadOf(
  s: Pick<Scenario, 'port' | 'requests'>,
  options: BenchOptions,
  seconds = options.roundSeconds,
): LoadSpec {
  const { connections } = options;
  return { url: origin(s.port), connections, durationSeconds: seconds, requests: s.requests };
}
