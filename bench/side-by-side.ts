import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { decodeProtectedHeader } from 'jose';
import { ALL_CPUS, pinTree, processTree } from './affinity.ts';
import { measureHalfLoad } from './half-load.ts';
import { signingKeyPem, startApache, startHaproxy } from './peers.ts';
import { cpuSeconds, startChild } from './processes.ts';
import type { Target } from './report.ts';
import { median } from './stats.ts';
import { automationPath } from './scenarios.ts';
import { origin, PORTS, type BenchOptions } from './settings.ts';
import { startMainProcess, type StackInfo } from './stack.ts';
import { runWrk, type WrkResult } from './wrk.ts';

/**
 * The side-by-side rows (README.md, "Side by side"): in each mode (per core, whole machine) the
 * rows in interleaved rounds of wrk, then realmgate and the limit at half of realmgate's peak.
 */
export const MODES = ['per core', 'whole machine'] as const;
export type Mode = (typeof MODES)[number];
/** The rows, in the order printed, and their names. */
export const NAMES = {
  limit: 'limit (node:http proxy, no auth)',
  'limit-undici': 'undici limit (its client an undici Pool, no auth)',
  'realmgate-1': 'realmgate WORKERS=1',
  'realmgate-auto': `realmgate WORKERS=auto (${cpus().length} workers)`,
  apache: 'Apache 2.4 + mod_auth_openidc',
  haproxy: 'HAProxy 2.6 + jwt_verify',
};
export type RowId = keyof typeof NAMES;
const ROW_IDS = Object.keys(NAMES) as RowId[];
const LIMIT_ROWS: readonly RowId[] = ['limit', 'limit-undici'];
/** Where a row's server listens and the process to pin and account (with those under it). */
type Server = { pid: number; port: number };

/** Medians of the rounds (each wrk's figures and the server's CPU time meanwhile); README.md. */
export interface SideRow {
  id: RowId;
  name: string;
  reqPerSec?: number;
  p99Ms?: number;
  cpuMicrosPerRequest?: number;
  cpusBusy?: number;
  rounds: (WrkResult & { serverCpuSeconds: number })[];
  unavailable?: string;
}
type ModeResult = {
  mode: Mode;
  rows: SideRow[];
  latency?: Awaited<ReturnType<typeof measureHalfLoad>>;
};
export type SideBySide = Awaited<ReturnType<typeof measureSideBySide>>;

/** The realmgate row that stands for each mode in the latency measurement and the targets. */
export const GATEWAY_OF: Record<Mode, RowId> = {
  'per core': 'realmgate-1',
  'whole machine': 'realmgate-auto',
};

interface Input {
  stack: StackInfo;
  organization: string;
  limitPid: number;
  /** Those that feed every row (the upstream, Keycloak). */
  feederPids: number[];
  /** An access token of a user holding the workspace role, living an hour (fixtures.ts). */
  token: string;
  options: BenchOptions;
  log: (text: string) => void;
}

export async function measureSideBySide(input: Input) {
  const notes: string[] = [];
  input.log('side by side: starting realmgate (WORKERS=1, WORKERS=auto), Apache and HAProxy');
  const side = await startSideServers(input);
  const modes: ModeResult[] = [];
  try {
    for (const mode of MODES) {
      const servers = side.serversOf(mode);
      // Per core: the server on CPU 0, the rest of the machine feeds it.
      const perCore = mode === 'per core';
      const feederCpus = perCore ? `1-${cpus().length - 1}` : ALL_CPUS;
      const pinned = await pinAll(servers, perCore ? '0' : ALL_CPUS, input.feederPids, feederCpus);
      if (perCore && !pinned) notes.push('per core: pinning failed (taskset): not per core');
      const rows = await measureRows(mode, servers, side.missing, input);
      const gateway = rows.find((r) => r.id === GATEWAY_OF[mode]);
      const latency =
        gateway?.reqPerSec && !rows.find((r) => r.id === 'limit')?.unavailable
          ? await measureHalfLoad({
              gateway: { id: gateway.id, port: servers[gateway.id]!.port, peak: gateway.reqPerSec },
              limitPort: servers.limit!.port,
              organization: input.organization,
              token: input.token,
              cpuList: perCore ? feederCpus : undefined,
              options: input.options,
              log: input.log,
            })
          : undefined;
      modes.push({ mode, rows, latency });
      await pinAll(servers, ALL_CPUS, input.feederPids, ALL_CPUS);
    }
  } finally {
    await pinAll(side.serversOf('whole machine'), ALL_CPUS, input.feederPids, ALL_CPUS);
    await side.stop();
  }
  return { modes, notes };
}

/** Each row refuses a forged token and is warmed up, then rounds interleaved across rows. */
async function measureRows(
  mode: Mode,
  servers: Record<RowId, Server | undefined>,
  missing: Partial<Record<RowId, string>>,
  { organization, options, log, token }: Input,
): Promise<SideRow[]> {
  const perCore = mode === 'per core';
  const url = (port: number) => `${origin(port)}${automationPath(organization)}`;
  const wrk = async (port: number, seconds: number, authorization?: string) =>
    runWrk({
      url: url(port),
      authorization: authorization ?? `Bearer ${token}`,
      connections: options.connections,
      threads: perCore ? cpus().length - 1 : cpus().length,
      seconds,
      cpuList: perCore ? `1-${cpus().length - 1}` : undefined,
    });
  const rows: SideRow[] = ROW_IDS.map((id) => ({
    id,
    name: NAMES[id],
    rounds: [],
    unavailable: missing[id],
  }));
  log(`side by side, ${mode}: a forged token refused, warm-up`);
  for (const row of rows.filter((r) => !r.unavailable)) {
    const { port } = servers[row.id]!;
    if (!LIMIT_ROWS.includes(row.id)) {
      const headers = { authorization: `Bearer ${forge(token)}` };
      const res = await fetch(url(port), { headers, signal: AbortSignal.timeout(10_000) });
      if (res.status !== 401) row.unavailable = `answered ${res.status} to a forged token`;
    }
    // wrk not installed: every row says so (spawn wrk ENOENT).
    const warm = await wrk(port, options.warmupSeconds).catch((err: Error) => err);
    if (warm instanceof Error) row.unavailable ??= `no warm-up: ${warm.message}`;
    else if (warm.ok === 0) row.unavailable ??= `no 2xx answer in the warm-up (${warm.bad} failed)`;
    if (row.unavailable) log(`  ${row.name}: ${row.unavailable}`);
  }
  for (let round = 1; round <= options.rounds; round++) {
    for (const row of rows.filter((r) => !r.unavailable)) {
      const server = servers[row.id]!;
      const before = await treeCpuSeconds(server.pid);
      const measured = await wrk(server.port, options.roundSeconds);
      const r = { ...measured, serverCpuSeconds: (await treeCpuSeconds(server.pid)) - before };
      row.rounds.push(r);
      const bad = r.bad ? ` (failed: ${r.bad})` : '';
      log(
        `  ${mode} ${round}/${options.rounds} ${row.name}: ${r.reqPerSec.toFixed(0)} req/s${bad}`,
      );
    }
  }
  for (const row of rows) {
    row.reqPerSec = median(row.rounds.map((r) => r.reqPerSec));
    row.p99Ms = median(row.rounds.flatMap((r) => (r.p99Ms === undefined ? [] : [r.p99Ms])));
    const costs = row.rounds.map((r) => (r.serverCpuSeconds * 1e6) / Math.max(r.ok, 1));
    row.cpuMicrosPerRequest = median(costs);
    row.cpusBusy = median(row.rounds.map((r) => r.serverCpuSeconds / options.roundSeconds));
  }
  return rows;
}

/** The token with one character of its signature changed: a server that verifies refuses it. */
function forge(token: string): string {
  const at = token.lastIndexOf('.') + 10;
  return `${token.slice(0, at)}${token[at] === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`;
}

/** CPU seconds used so far by `pid` and the processes under it (Apache's, the workers). */
async function treeCpuSeconds(pid: number): Promise<number> {
  return (await processTree(pid)).reduce((sum, p) => sum + cpuSeconds(p), 0);
}

/** Every server (with its processes) on `serverCpus`, the feeders on `feederCpus`. */
async function pinAll(
  servers: Record<RowId, Server | undefined>,
  serverCpus: string,
  feederPids: number[],
  feederCpus: string,
): Promise<boolean> {
  const pinning = [
    ...Object.values(servers).flatMap((s) => (s ? [pinTree(s.pid, serverCpus)] : [])),
    ...feederPids.map((pid) => pinTree(pid, feederCpus)),
  ];
  return (await Promise.all(pinning)).every(Boolean);
}

/**
 * Starts the rows' servers besides the limit (ports base + 140..185), their configurations and
 * the key that signed `token` in a temporary directory; `missing`: why a server did not start.
 */
async function startSideServers(input: Input) {
  const dir = await mkdtemp(path.join(tmpdir(), 'realmgate-bench-peers-'));
  const jwksUrl = `${input.stack.keycloakUrl}/realms/${input.organization}/protocol/openid-connect/certs`;
  const kid = String(decodeProtectedHeader(input.token).kid);
  const key = { kid, file: path.join(dir, 'realm-key.pem') };
  await writeFile(key.file, await signingKeyPem(jwksUrl, key.kid));
  const port = (offset: number) => PORTS.base + offset;
  const at = (offset: number) => ({ dir, port: port(offset), upstream: origin(PORTS.upstream) });
  const missing: Partial<Record<RowId, string>> = {};
  const undiciLimit = await startChild('servers.ts', {
    env: { BENCH_PORT: port(185), BENCH_UPSTREAM: origin(PORTS.upstream), BENCH_CLIENT: 'undici' },
  });
  // A server that does not start (a peer not installed...) leaves its row without numbers,
  // saying why; the rest go on.
  const startOrSay = <T>(id: RowId, start: () => Promise<T>) =>
    start().catch((err: Error) => {
      missing[id] = `did not start: ${err.message}`;
      return undefined;
    });
  const started = await Promise.all([
    startOrSay('realmgate-1', () => startMainProcess(input.stack, port(140), { WORKERS: '1' })),
    startOrSay('realmgate-auto', () =>
      startMainProcess(input.stack, port(150), { WORKERS: 'auto' }),
    ),
    startOrSay('apache', () => startApache(at(160), key)),
    startOrSay('haproxy', () => startHaproxy(at(170), key.file, 1)),
    startOrSay('haproxy', () => startHaproxy(at(180), key.file, cpus().length)),
  ]);
  const [one, auto, apache, haproxyOne, haproxyAll] = started;
  const server = (s: { commandPid: number } | undefined, offset: number) =>
    s && { pid: s.commandPid, port: port(offset) };
  return {
    missing,
    /** The server of each row in `mode` (HAProxy's threads differ); undefined if missing. */
    serversOf(mode: Mode): Record<RowId, Server | undefined> {
      return {
        limit: { pid: input.limitPid, port: PORTS.limitProxy },
        'limit-undici': { pid: undiciLimit.pid, port: port(185) },
        'realmgate-1': server(one, 140),
        'realmgate-auto': server(auto, 150),
        apache: server(apache, 160),
        haproxy: mode === 'per core' ? server(haproxyOne, 170) : server(haproxyAll, 180),
      };
    },
    async stop() {
      await Promise.all([undiciLimit.stop(), ...started.flatMap((s) => (s ? [s.stop()] : []))]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Each mode's realmgate row ÷ `reference` (issue 47; per core restated from 1.0: results.md). */
const TARGETS: { mode: Mode; reference: RowId; min: number }[] = [
  { mode: 'per core', reference: 'limit-undici', min: 0.8 },
  { mode: 'per core', reference: 'apache', min: 1.3 },
  { mode: 'whole machine', reference: 'apache', min: 1.3 },
];

/**
 * row ÷ reference in `mode`: the ratio of median rates, each round's (interleaved), and of
 * costs (the reference's CPU µs per answer ÷ the row's), on which the targets are judged.
 */
export function ratioOf(result: SideBySide, mode: Mode, row: RowId, reference: RowId) {
  const rowsOf = result.modes.find((m) => m.mode === mode)?.rows;
  const [a, b] = [row, reference].map((id) => rowsOf?.find((r) => r.id === id));
  if (!a?.reqPerSec || !b?.reqPerSec) return undefined;
  const rounds = a.rounds.map((r, i) => r.reqPerSec / Math.max(b.rounds[i]?.reqPerSec ?? 0, 1));
  const byCost = (b.cpuMicrosPerRequest ?? NaN) / (a.cpuMicrosPerRequest ?? NaN);
  return { median: a.reqPerSec / b.reqPerSec, rounds, byCost };
}

export function judgeSideTargets(result: SideBySide): Target[] {
  return TARGETS.map(({ mode, reference, min }) => {
    const row = GATEWAY_OF[mode];
    const target = `${mode}: ${NAMES[row]} ≥ ${min} × ${NAMES[reference]}`;
    const ratio = ratioOf(result, mode, row, reference);
    if (!ratio) return { target, measured: 'not measured', met: undefined };
    return { target, measured: describe(ratio), met: ratio.byCost >= min };
  });
}

function describe(ratio: NonNullable<ReturnType<typeof ratioOf>>): string {
  const rounds = ratio.rounds.map((r) => r.toFixed(2)).join(', ');
  return `by cost ${ratio.byCost.toFixed(3)}; by rate ${ratio.median.toFixed(3)} (rounds ${rounds})`;
}

/**
 * The side-by-side rows as Markdown: req/s per row and mode, realmgate's ratios to the limit,
 * Apache and HAProxy (median of rounds, each round's ratio beside), the issue's targets, and
 * the p99 latency realmgate adds at half its peak.
 */
export function formatSideBySide(result: SideBySide): string {
  const num = (v: number | undefined, digits: number) => v?.toFixed(digits) ?? '';
  const cell = (mode: Mode, id: RowId) => {
    const row = result.modes.find((m) => m.mode === mode)?.rows.find((r) => r.id === id);
    if (!row || row.unavailable) return `${row?.unavailable ?? 'not measured'} | | | |`;
    const bad = row.rounds.reduce((sum, r) => sum + r.bad, 0);
    const rate = `${num(row.reqPerSec, 0)}${bad ? ` (${bad} failed)` : ''}`;
    const cost = `${num(row.cpuMicrosPerRequest, 0)} | ${num(row.cpusBusy, 2)}`;
    return `${rate} | ${num(row.p99Ms, 2)} | ${cost}`;
  };
  const ids = result.modes[0]!.rows.map((r) => r.id);
  const ratioRows = (['limit', 'limit-undici', 'apache', 'haproxy'] as const).map((reference) => {
    const cells = MODES.map((mode) => {
      const ratio = ratioOf(result, mode, GATEWAY_OF[mode], reference);
      return ratio ? describe(ratio) : 'not measured';
    });
    return `| realmgate ÷ ${NAMES[reference]} | ${cells.join(' | ')} |`;
  });
  const latencyRows = MODES.map((mode) => {
    const l = result.modes.find((m) => m.mode === mode)?.latency;
    if (!l) return `| ${mode} | not measured | | | |`;
    const p99s = [l.limitP99Ms, l.gatewayP99Ms, l.addedP99Ms].map((v) => num(v, 2)).join(' | ');
    return `| ${mode}, ${NAMES[GATEWAY_OF[mode]]} | ${l.rate} | ${p99s} |`;
  });
  return [
    '| row (wrk) | per core req/s | p99 ms | CPU µs/req | CPUs busy | whole machine req/s | p99 ms | CPU µs/req | CPUs busy |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...ids.map((id) => `| ${NAMES[id]} | ${MODES.map((mode) => cell(mode, id)).join(' | ')} |`),
    '',
    '| ratio: median of rows (each round) | per core (WORKERS=1) | whole machine (auto) |',
    '|---|---|---|',
    ...ratioRows,
    '',
    "| at half of realmgate's peak | req/s | limit p99 ms | realmgate p99 ms | added p99 ms |",
    '|---|---:|---:|---:|---:|',
    ...latencyRows,
    '',
    '| target (issues 23, 47) | measured | met |',
    '|---|---|---|',
    ...judgeSideTargets(result).map(
      (t) =>
        `| ${t.target} | ${t.measured} | ${t.met === undefined ? 'n/a' : t.met ? 'met' : 'not met'} |`,
    ),
  ].join('\n');
}
