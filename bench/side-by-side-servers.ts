import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { missingPeer, signingKeyPem, startApache, startHaproxy } from './peers.ts';
import { origin, PORTS } from './settings.ts';
import { startChild } from './processes.ts';
import { startMainProcess, type StackInfo } from './stack.ts';

/** The rows of the side-by-side section, in the order printed. */
export const ROW_IDS = [
  'limit',
  'limit-undici',
  'realmgate-1',
  'realmgate-auto',
  'apache',
  'haproxy',
] as const;
/** The rows without authentication: what Node's HTTP costs, with either client. */
export const LIMIT_ROWS: readonly RowId[] = ['limit', 'limit-undici'];
export type RowId = (typeof ROW_IDS)[number];
export const MODES = ['per core', 'whole machine'] as const;
export type Mode = (typeof MODES)[number];

export const ROW_NAMES: Record<RowId, string> = {
  limit: 'limit: minimal node:http proxy, no auth',
  'limit-undici': 'undici limit: the same, its client an undici Pool (dispatch), no auth',
  'realmgate-1': 'realmgate, WORKERS=1 (node src/main.ts)',
  'realmgate-auto': `realmgate, WORKERS=auto (${cpus().length} workers)`,
  apache: 'Apache 2.4 + mod_auth_openidc, RS256',
  haproxy: 'HAProxy 2.6 + jwt_verify, RS256',
};

/** Where a row's server listens and the process to pin and account (with those under it). */
export type Server = { pid: number; port: number };

/**
 * Starts what the rows need besides the limit: the undici limit (servers.ts, + 185), realmgate
 * as it is run with WORKERS=1 and WORKERS=auto (gateways on base + 140 and + 150), Apache
 * (+160) and two HAProxy, one thread (+170, per core) and one per CPU (+180, whole machine),
 * their configurations and the realm's key in a temporary directory. `token` names the signing key. A peer whose package is missing
 * has no server, and `missing` says why.
 */
export async function startSideServers(input: {
  stack: StackInfo;
  organization: string;
  limitPid: number;
  token: string;
}) {
  const dir = await mkdtemp(path.join(tmpdir(), 'realmgate-bench-peers-'));
  const { keycloakUrl } = input.stack;
  const jwksUrl = `${keycloakUrl}/realms/${input.organization}/protocol/openid-connect/certs`;
  const key = { kid: kidOf(input.token), file: path.join(dir, 'realm-key.pem') };
  await writeFile(key.file, await signingKeyPem(jwksUrl, key.kid));
  const port = (offset: number) => PORTS.base + offset;
  const at = (offset: number) => ({ dir, port: port(offset), upstream: origin(PORTS.upstream) });
  const missing: Partial<Record<RowId, string>> = {
    apache: missingPeer('apache'),
    haproxy: missingPeer('haproxy'),
  };
  const undiciLimit = await startChild('servers.ts', {
    env: { BENCH_PORT: port(185), BENCH_UPSTREAM: origin(PORTS.upstream), BENCH_CLIENT: 'undici' },
  });
  // A server that does not start leaves its row without numbers, saying why; the rest go on.
  const unlessMissing = async <T>(id: RowId, start: () => Promise<T>) => {
    if (missing[id]) return undefined;
    return start().catch((err: Error) => {
      missing[id] = `did not start: ${err.message}`;
      return undefined;
    });
  };
  const started = await Promise.all([
    unlessMissing('realmgate-1', () => startMainProcess(input.stack, port(140), { WORKERS: '1' })),
    unlessMissing('realmgate-auto', () =>
      startMainProcess(input.stack, port(150), { WORKERS: 'auto' }),
    ),
    unlessMissing('apache', () => startApache(at(160), key)),
    unlessMissing('haproxy', () => startHaproxy(at(170), key.file, 1)),
    unlessMissing('haproxy', () => startHaproxy(at(180), key.file, cpus().length)),
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

function kidOf(token: string): string {
  const header = Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8');
  return (JSON.parse(header) as { kid: string }).kid;
}
