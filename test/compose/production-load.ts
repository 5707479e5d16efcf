import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, vi } from 'vitest';
import { runLoad, type LoadRequest, type LoadResult } from '../../bench/load.ts';
import { basicAuth } from '../helpers/api.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { haproxyLogFigures } from '../ha/haproxy.ts';
import { LOAD } from '../ha/measure.ts';
import {
  ADMIN_URL,
  HOST_ON_STACK_NETWORK,
  PUBLIC_URL,
  startComposeStack,
  type ComposeStack,
  type StackOptions,
} from './stack.ts';
import { apiCall, tokenGrant } from './walk.ts';

/*
 * What the production profile's files share (production.test.ts, upgrade.test.ts,
 * backup-restore.test.ts, keycloak-patch.trial.ts): their fixture (secrets, an organization and
 * its load users, the recording upstream, the stacks taken down after the file), the
 * administrator's token, an organization made as an administrator makes one, the steady load
 * through HAProxy and its figures, and HAProxy's view of the replicas.
 */

export interface User {
  username: string;
  password: string;
}

/** A random secret or password (32 URL-safe characters). */
export const newSecret = () => randomBytes(24).toString('base64url');

/**
 * The production profile's secrets (docker-compose.yml's `secrets`, from the environment), and
 * the database password (its config `database-password`, from POSTGRES_PASSWORD).
 */
export interface StackSecrets extends Record<string, string> {
  KEYCLOAK_ADMIN_PASSWORD: string;
  KEYCLOAK_CLIENT_SECRET: string;
  REALMGATE_CACHE_SECRET: string;
  POSTGRES_PASSWORD: string;
}

/** What a production-profile file sets up: made once per file, its stacks taken down after it. */
export interface ProductionFixture {
  /** The organization's id (`<prefix>-<6 hex>`), its one workspace, its forwarded route. */
  org: string;
  workspace: string;
  forwardedPath: string;
  secrets: StackSecrets;
  /** The load users, `load-0`, `load-1`, ...: members of the workspace. */
  users: User[];
  /** The automation service stand-in the gateways forward to (started by `startStack`). */
  upstream(): RecordingUpstream;
  /** The production profile up to HAProxy (or `options.services`), with the fixture's secrets. */
  startStack(options?: StackOptions): Promise<ComposeStack>;
  /** The bootstrap administrator's Bearer token. */
  adminBearer(): Promise<string>;
  /** The organization, its workspace and the load users and `others`, through the API. */
  makeOrganization(name: string, others?: User[]): Promise<void>;
  /** `owner`'s job credential "nightly" (read-only, the workspace only): its refresh token. */
  jobCredential(owner: User): Promise<string>;
}

/**
 * The fixture of a production-profile file; registers the `afterAll` that takes down every stack
 * it started (`down -v`) and closes the upstream. Call it at the top of the file.
 */
export function productionFixture(prefix: string, loadUsers = 2): ProductionFixture {
  const org = `${prefix}-${randomBytes(3).toString('hex')}`;
  const workspace = 'ws1';
  const secrets: StackSecrets = {
    KEYCLOAK_ADMIN_PASSWORD: newSecret(),
    KEYCLOAK_CLIENT_SECRET: newSecret(),
    REALMGATE_CACHE_SECRET: newSecret(),
    POSTGRES_PASSWORD: newSecret(),
  };
  const users = Array.from({ length: loadUsers }, (_, i) => ({
    username: `load-${i}`,
    password: newSecret(),
  }));
  const stacks: ComposeStack[] = [];
  let upstream: RecordingUpstream | undefined;
  afterAll(async () => {
    for (const stack of stacks) await stack.down();
    await upstream?.close();
  }, 180_000);
  return {
    org,
    workspace,
    forwardedPath: `/api/${org}/workspaces/${workspace}/ita/operations`,
    secrets,
    users,
    upstream: () => {
      if (!upstream) throw new Error('the upstream starts with the first stack');
      return upstream;
    },
    startStack: async (options = {}) => {
      upstream ??= await startRecordingUpstream('0.0.0.0');
      const stack = await startComposeStack({
        profile: 'production',
        services: ['load-balancer'],
        ...options,
        environment: {
          ...secrets,
          AUTOMATION_UPSTREAM_URL: `http://${HOST_ON_STACK_NETWORK}:${new URL(upstream.url).port}`,
          ...options.environment,
        },
      });
      stacks.push(stack);
      return stack;
    },
    adminBearer: () => adminBearer(secrets.KEYCLOAK_ADMIN_PASSWORD),
    makeOrganization: async (name, others = []) =>
      makeOrganization(
        await adminBearer(secrets.KEYCLOAK_ADMIN_PASSWORD),
        { id: org, name, workspace },
        [...users, ...others],
      ),
    jobCredential: async (owner) => {
      const job = await tokenGrant(org, {
        grant_type: 'password',
        scope: 'openid offline_access',
        ...owner,
        realmgate_name: 'nightly',
        realmgate_workspaces: workspace,
        realmgate_read_only: 'true',
      });
      expect(job.status, JSON.stringify(job.json)).toBe(200);
      return job.json.refresh_token;
    },
  };
}

/** The bootstrap administrator's Bearer token: it logs in on the admin listener only. */
export async function adminBearer(adminPassword: string): Promise<string> {
  const grant = await tokenGrant(
    'master',
    { grant_type: 'password', scope: 'openid', username: 'admin', password: adminPassword },
    ADMIN_URL,
  );
  expect(grant.status, JSON.stringify(grant.json)).toBe(200);
  return `Bearer ${grant.json.access_token}`;
}

/**
 * A platform POST that is safe to repeat (an organization's or a workspace's creation: Keycloak
 * first, "unless it exists"), repeated while the gateway answers that Keycloak was too slow or
 * unreachable (503/504), as an administrator would: a Keycloak cluster just started can take
 * longer than KEYCLOAK_TIMEOUT_MS over its first realm. Each such answer is printed.
 */
async function postRepeatable(path: string, admin: string, body: unknown) {
  for (let attempt = 1; ; attempt++) {
    const answer = await apiCall(path, admin, { method: 'POST', body });
    if (![503, 504].includes(answer.status) || attempt === 3) return answer;
    console.log(`POST ${path}: ${answer.status} ${JSON.stringify(answer.json)}; again`);
  }
}

/** An organization, its one workspace, and its users holding that workspace, through the API. */
export async function makeOrganization(
  admin: string,
  org: { id: string; name: string; workspace: string },
  users: User[],
): Promise<void> {
  const made = [
    await postRepeatable('/api/platform/organizations', admin, { id: org.id, name: org.name }),
    await postRepeatable(`/api/platform/organizations/${org.id}/workspaces`, admin, {
      id: org.workspace,
      name: `${org.name} workspace`,
    }),
    ...(await Promise.all(
      users.map((user) =>
        apiCall(`/api/platform/organizations/${org.id}/users`, admin, {
          method: 'POST',
          body: { ...user, workspaces: [org.workspace] },
        }),
      ),
    )),
  ];
  expect(
    made.map((answer) => answer.status),
    JSON.stringify(made.map((answer) => answer.json)),
  ).toEqual(made.map(() => 200));
}

/**
 * Each user's Bearer token and Basic login on `path`, each used a few times (round robin: four
 * rounds reach both replicas, and their workers, with each credential).
 */
export async function warmRequests(
  org: string,
  path: string,
  users: User[],
  bearerOnly = false,
): Promise<LoadRequest[]> {
  const requests: LoadRequest[] = [];
  for (const user of users) {
    const grant = await tokenGrant(org, { grant_type: 'password', scope: 'openid', ...user });
    expect(grant.status).toBe(200);
    requests.push({ path, authorization: `Bearer ${grant.json.access_token}` });
    if (!bearerOnly) requests.push({ path, authorization: basicAuth(user) });
  }
  for (let round = 0; round < 4; round++) {
    for (const request of requests) {
      expect((await apiCall(request.path, request.authorization!)).status).toBe(200);
    }
  }
  return requests;
}

/** The steady load, from a load generator process of its own (bench/load.ts); `stop` ends it. */
export function steadyLoad(
  requests: LoadRequest[],
  durationSeconds: number,
  stop?: AbortSignal,
): Promise<LoadResult> {
  return runLoad(
    {
      url: PUBLIC_URL,
      connections: LOAD.connections,
      durationSeconds,
      overallRate: LOAD.rate,
      requests,
    },
    undefined,
    stop,
  );
}

/**
 * `work` under the steady load through HAProxy on `fixture`'s forwarded route (begun 4 s before
 * it, ended 5 s after it, `maxSeconds` at most); what it returned, the load's result, how long the
 * load ran, and HAProxy's figures of that time.
 */
export async function underLoad<T>(
  stack: ComposeStack,
  fixture: Pick<ProductionFixture, 'org' | 'forwardedPath' | 'users'>,
  maxSeconds: number,
  work: () => Promise<T>,
) {
  const requests = await warmRequests(fixture.org, fixture.forwardedPath, fixture.users);
  const offset = (await balancerLog(stack)).length;
  const stop = new AbortController();
  const since = performance.now();
  const load = steadyLoad(requests, maxSeconds, stop.signal);
  try {
    await sleep(4000);
    const outcome = await work();
    await sleep(5000);
    stop.abort();
    const result = await load;
    const seconds = (performance.now() - since) / 1000;
    return { outcome, result, seconds, haproxy: await balancerLog(stack, offset) };
  } finally {
    stop.abort();
  }
}

/** The load's figures; with `served`, how many answers each replica gave (where counted). */
export function loadFigures(
  result: LoadResult,
  served?: Record<string, number>,
): Record<string, string> {
  const load = `${result.ok + result.bad} requests, ${result.bad} failed, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, statuses ${JSON.stringify(result.statusCodes)}`;
  if (!served) return { 'load through HAProxy': load };
  return {
    'load through HAProxy': load,
    'answered by gateway-1 / gateway-2': `${served['gateway-1'] ?? 0} / ${served['gateway-2'] ?? 0}`,
  };
}

/** HAProxy's log so far; the figures of what it logs after `offset`. */
export async function balancerLog(stack: ComposeStack, offset = 0) {
  const text = await stack.logs('load-balancer');
  return { length: text.length, ...haproxyLogFigures(text.slice(offset)) };
}

/**
 * Waits until HAProxy has a replica in rotation on both listeners (its `/readyz` checks passed
 * twice): Docker calls the containers healthy seconds before that, and until then HAProxy
 * answers with its own 503 page. The seconds it took.
 */
export async function balancerServes(): Promise<number> {
  const since = performance.now();
  const status = async (base: string) =>
    (await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5000) }).catch(() => undefined))
      ?.status;
  for (const base of [PUBLIC_URL, ADMIN_URL]) {
    // vi.waitFor, not expect.poll: this also runs in beforeAll, where expect.poll cannot.
    await vi.waitFor(async () => expect(await status(base)).toBe(200), {
      timeout: 120_000,
      interval: 500,
    });
  }
  return (performance.now() - since) / 1000;
}

/**
 * Waits until `server` (a replica just recreated) is back in HAProxy's rotation: Docker calls its
 * container healthy, and on both backends (public and admin) HAProxy's last state change for it
 * since `offset` is `UP`, or there is none (a replica replaced within one check interval or two
 * is never marked DOWN; by the time Docker calls the new one healthy, 10 s or more after it
 * started, HAProxy's checks have passed on it several times). The seconds since `since`.
 */
export async function backInRotation(
  stack: ComposeStack,
  server: string,
  offset: number,
  since: number,
): Promise<number> {
  const inRotation = async () => {
    const health = await stack.compose('ps', '--format', '{{.Health}}', server).catch(() => '');
    if (health.trim() !== 'healthy') return false;
    const { stateChanges } = await balancerLog(stack, offset);
    return ['public', 'admin'].every((side) => {
      const prefix = `Server gateways-${side}/${server} is `;
      const last = stateChanges.filter((line) => line.startsWith(prefix)).at(-1);
      return last === undefined || last.startsWith(`${prefix}UP`);
    });
  };
  await expect.poll(inRotation, { timeout: 180_000, interval: 500 }).toBe(true);
  return (performance.now() - since) / 1000;
}
