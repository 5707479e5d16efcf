import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { runLoad } from './load.ts';
import { startChild, stopAllChildren } from './processes.ts';
import { dropDatabase, prepareDatabase } from './stack.ts';
import { median } from './stats.ts';

/**
 * `node bench/ab.ts [--route forwarded|token] [--a <tree>] [--b <tree>] [--a-env K=V,...]
 * [--b-env K=V,...] [--rounds N] [--round-seconds S]`: is B slower than A? Two gateways, each
 * from its own source tree (default: this one) with its own extra settings, loaded at the same
 * moment and pinned together on the last CPU, as the bench's paired rounds are. `forwarded`:
 * the automation route's hot path, auth off (the bench's constant principal: no Keycloak; the
 * edge, admission (answered from memory) and forwarder are the gateway's own code). `token`: a refresh grant
 * through `/auth`, whose Keycloak is the trivial upstream (the proxy, not Keycloak, is
 * measured). Prints each round's B ÷ A and their median. A tree needs its own
 * `bench/gateway-process.ts` and `node_modules` (a symlink will do).
 */
const run = promisify(execFile);
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!, process.argv[i + 1]!);
/** `K=V,K=V` as settings. */
function envOf(spec = ''): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of spec.split(',').filter(Boolean)) {
    const at = entry.indexOf('=');
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}
const sides = [
  { name: 'A', tree: args.get('--a') ?? here, env: envOf(args.get('--a-env')), port: 28500 },
  { name: 'B', tree: args.get('--b') ?? here, env: envOf(args.get('--b-env')), port: 28510 },
];
/** `forwarded` (default): the automation route; `token`: a refresh grant through `/auth`. */
const route = args.get('--route') ?? 'forwarded';
const rounds = Number(args.get('--rounds') ?? 5);
const roundSeconds = Number(args.get('--round-seconds') ?? 5);
const ORG = 'bench-ab';
const WORKSPACE = 'ws1';
const DATABASE = 'realmgate_ab';
const count = cpus().length;
const [measured, feeders] = [`${count - 1}`, `0-${Math.max(count - 2, 0)}`];

async function main(): Promise<void> {
  const databaseUrl = await prepareDatabase(DATABASE);
  await startChild('servers.ts', { env: { BENCH_PORT: '28520' }, cpuList: feeders });
  for (const side of sides) {
    const env = {
      HOST: '127.0.0.1',
      PORT: String(side.port),
      ADMIN_PORT: String(side.port + 1),
      LOG_LEVEL: 'silent',
      // The token route's Keycloak is the trivial upstream: it answers any request at once, so
      // what is measured is the gateway's /auth proxy, not Keycloak's password hashing.
      KEYCLOAK_URL: route === 'token' ? 'http://127.0.0.1:28520/auth' : 'http://127.0.0.1:9/auth',
      KEYCLOAK_ADMIN_PASSWORD: 'ab-admin-password-0123456789',
      KEYCLOAK_CLIENT_SECRET: 'ab-client-secret-0123456789',
      DATABASE_URL: databaseUrl,
      AUTOMATION_UPSTREAM_URL: 'http://127.0.0.1:28520',
      REVOCATION_CHECK_SECONDS: 'off',
      ...side.env,
    };
    const spec = {
      env,
      keycloakUrl: env.KEYCLOAK_URL,
      authOff: { organization: ORG, workspace: WORKSPACE },
    };
    await startChild(path.join(side.tree, 'bench/gateway-process.ts'), {
      env: { BENCH_GATEWAY: JSON.stringify(spec) },
      cpuList: measured,
    });
  }
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  await db.query('INSERT INTO organizations (id, name) VALUES ($1, $1)', [ORG]);
  await db.query('INSERT INTO workspaces (organization_id, id, name) VALUES ($1, $2, $2)', [
    ORG,
    WORKSPACE,
  ]);
  await db.end();

  const load = (port: number, seconds: number) =>
    runLoad(
      {
        url: `http://127.0.0.1:${port}`,
        connections: 32,
        durationSeconds: seconds,
        requests: [
          route === 'token'
            ? {
                path: `/auth/realms/${ORG}/protocol/openid-connect/token`,
                form: `grant_type=refresh_token&client_id=_${ORG}-api&refresh_token=${'r'.repeat(800)}`,
              }
            : {
                path: `/api/${ORG}/workspaces/${WORKSPACE}/ita/menu/operation_list/filter/`,
                authorization: 'Bearer constant',
              },
        ],
      },
      feeders,
    );
  const both = (seconds: number) => Promise.all(sides.map((side) => load(side.port, seconds)));
  // Unknown organizations are remembered for 5 s: warm up past that, then once more, uncounted.
  await both(6);
  const ratios: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const [a, b] = await both(roundSeconds);
    const ratio = b!.reqPerSec / Math.max(a!.reqPerSec, 1);
    ratios.push(ratio);
    console.log(
      `round ${round}: A ${a!.reqPerSec.toFixed(0)} req/s (p99 ${a!.p99Ms} ms), ` +
        `B ${b!.reqPerSec.toFixed(0)} req/s (p99 ${b!.p99Ms} ms), B ÷ A ${ratio.toFixed(3)}`,
    );
  }
  console.log(`median B ÷ A: ${median(ratios)!.toFixed(3)} over ${rounds} rounds`);
}

try {
  await run('taskset', ['--version']);
  await main();
} finally {
  await stopAllChildren();
  await dropDatabase(DATABASE);
}
