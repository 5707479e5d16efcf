import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildInfo } from '../../src/release/build-info.ts';
import { VERSION } from '../../src/release/version.ts';
import { basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

/** One scrape: every sample by `name{labels}` as Prometheus prints it, and the raw text. */
interface Scrape {
  text: string;
  samples: Map<string, number>;
}

async function scrape(replica: Replica): Promise<Scrape> {
  const res = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return { text, samples };
}

/** A sample's value (0 when absent), labels given in the order the gateway prints them. */
function valueOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return scrape.samples.get(parts.length ? `${name}{${parts.join(',')}}` : name) ?? 0;
}

/** Every metric family the scrape declares. */
function families(scrape: Scrape): Set<string> {
  return new Set([...scrape.text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

/** Resolves once `condition` holds (waited for as `EVENTUALLY` says). */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  await vi.waitFor(async () => {
    if (!(await condition())) throw new Error('condition not met');
  }, EVENTUALLY);
}

const requests = (route: string, method: string, status: string, auth: string) => ({
  route,
  method,
  status,
  auth,
});

/**
 * `/metrics` on the admin listener of real replicas in front of the real Keycloak, PostgreSQL
 * and Redis: each kind of request moves the counters it should, and no label carries a name,
 * an id, a path or a token.
 */
describe('metrics', () => {
  let upstream: RecordingUpstream;
  let replica: Replica;
  let peer: Replica;
  let admin: TestUser;
  let org: string;
  let member: TestUser;
  let before: Scrape;
  let after: Scrape;
  let token: string;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const shared = {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `realmgate-metrics:${randomBytes(4).toString('hex')}:`,
      AUTOMATION_UPSTREAM_URL: upstream.url,
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '1',
    };
    replica = await startReplica(18800, shared);
    peer = await startReplica(18810, shared);
    admin = await createUser('master');
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await peer?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  const call = (path: string, authorization?: string, method = 'GET', body?: unknown) =>
    fetch(`${replica.url}${path}`, {
      method,
      headers: {
        ...(authorization ? { authorization } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(async (res) => {
      await res.arrayBuffer();
      return res.status;
    });

  async function tokenOf(user: TestUser): Promise<string> {
    const res = await fetch(
      `${replica.url}/auth/realms/${user.realm}/protocol/openid-connect/token`,
      {
        method: 'POST',
        body: new URLSearchParams({
          client_id: user.realm === 'master' ? '_platform-api' : `_${user.realm}-api`,
          grant_type: 'password',
          // An offline session: the refresh tokens the revocation below ends.
          scope: 'openid offline_access',
          username: user.username,
          password: user.password,
        }),
      },
    );
    const json = (await res.json()) as { access_token: string };
    return json.access_token;
  }

  it('is served on the admin listener only; the public one answers 404 in the envelope', async () => {
    const res = await fetch(`${replica.url}/metrics`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ result: '404-00000' });
    const scraped = await scrape(replica);
    for (const family of [
      'realmgate_http_requests_total',
      'realmgate_http_request_duration_seconds',
      'realmgate_auth_failures_total',
      'realmgate_cache_lookups_total',
      'realmgate_keycloak_requests_total',
      'realmgate_keycloak_request_duration_seconds',
      'realmgate_token_rechecks_total',
      'realmgate_revocations_applied_total',
      'realmgate_dependency_up',
      'realmgate_keycloak_node_up',
      'realmgate_database_connections',
      'realmgate_build_info',
      'process_cpu_user_seconds_total',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(families(scraped), family).toContain(family);
    }
  });

  it('names the state of Keycloak, the database and Redis', async () => {
    const scraped = await scrape(replica);
    for (const dependency of ['keycloak', 'database', 'cache']) {
      expect(valueOf(scraped, 'realmgate_dependency_up', { dependency })).toBe(1);
    }
    // One Keycloak URL: one node, named by its position.
    expect(valueOf(scraped, 'realmgate_keycloak_node_up', { node: '0' })).toBe(1);
    expect(scraped.samples.has('realmgate_keycloak_node_up{node="1"}')).toBe(false);
    expect(scraped.samples.has('realmgate_database_connections{state="free"}')).toBe(true);
  });

  it('has a series for every readiness check /readyz shows, the areas added late included', async () => {
    const ready = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`);
    const checks = Object.keys(((await ready.json()) as { data: object }).data);
    // The areas' own checks, added after the metrics were built (docs/operations.md).
    expect(checks).toEqual(expect.arrayContaining(['backchannel_logout', 'audit_log']));
    const scraped = await scrape(replica);
    for (const dependency of checks) {
      const series = `realmgate_dependency_up{dependency="${dependency}"}`;
      expect(scraped.samples.has(series), series).toBe(true);
    }
  });

  it('names the build it runs: version, revision and Node, value 1', async () => {
    const scraped = await scrape(replica);
    const build = buildInfo();
    expect(
      valueOf(scraped, 'realmgate_build_info', {
        version: VERSION,
        revision: build.revision,
        node_version: process.versions.node,
      }),
    ).toBe(1);
    expect(
      [...scraped.samples.keys()].filter((k) => k.startsWith('realmgate_build_info')),
    ).toHaveLength(1);
  });

  describe('after one of each kind of request', () => {
    beforeAll(async () => {
      before = await scrape(replica);
      const peerBefore = await scrape(peer);
      const forwarded = `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter`;

      token = await tokenOf(member); // token endpoint, no credentials, 2xx
      expect(await call(forwarded, `Bearer ${token}`)).toBe(200); // verified: miss
      expect(await call(forwarded, `Bearer ${token}`)).toBe(200); // verified: hit
      expect(await call('/api/platform/organizations', basicAuth(admin))).toBe(200); // login
      expect(await call('/api/platform/organizations', basicAuth(admin))).toBe(200); // cached
      expect(await call('/api/platform/users/_current/refresh_tokens', basicAuth(admin))).toBe(200);
      expect(await call('/api/platform/organizations', basicAuth(admin), 'POST', {})).toBe(400);

      expect(await call(forwarded)).toBe(401); // missing
      expect(await call(forwarded, 'Bearer not-a-jwt')).toBe(401); // bad_token
      const masterToken = await tokenOf(admin);
      expect(await call(forwarded, `Bearer ${masterToken}`)).toBe(401); // wrong_realm

      const victim = await createUser(org, { workspaceRoles: ['ws1'] });
      const wrong = basicAuth({ ...victim, password: `${victim.password}x` });
      expect(await call(forwarded, wrong)).toBe(401); // wrong_password
      // Refused before Keycloak is asked: one failure per account and address is allowed here.
      const wronger = basicAuth({ ...victim, password: `${victim.password}y` });
      expect(await call(forwarded, wronger)).toBe(429); // throttled (1 failure allowed)

      const otpUser = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
      expect(await call(forwarded, basicAuth(otpUser))).toBe(401); // two_factor

      // Revoked on this replica (local), applied on the peer through Redis (peer).
      const revokePath = `/api/${org}/platform/users/_current/refresh_tokens`;
      expect(await call(revokePath, `Bearer ${token}`, 'DELETE')).toBe(200);
      expect(await call(forwarded, `Bearer ${token}`)).toBe(401); // revoked

      await waitFor(async () => {
        const now = await scrape(peer);
        const source = { source: 'peer' };
        return (
          valueOf(now, 'realmgate_revocations_applied_total', source) -
            valueOf(peerBefore, 'realmgate_revocations_applied_total', source) ===
          1
        );
      });
      // The background re-check queued by the first token has run (before or after the revocation).
      await waitFor(async () => {
        const now = await scrape(replica);
        const run = ['active', 'inactive', 'failed'].map((event) =>
          valueOf(now, 'realmgate_token_rechecks_total', { event }),
        );
        return run.some((count) => count > 0);
      });
      after = await scrape(replica);
    });

    const delta = (name: string, labels: Record<string, string> = {}) =>
      valueOf(after, name, labels) - valueOf(before, name, labels);

    it('counts requests by route class, method, status class and scheme', () => {
      const name = 'realmgate_http_requests_total';
      expect(delta(name, requests('token', 'POST', '2xx', 'none'))).toBe(2);
      expect(delta(name, requests('forwarded', 'GET', '2xx', 'bearer'))).toBe(2);
      expect(delta(name, requests('forwarded', 'GET', '4xx', 'none'))).toBe(1);
      expect(delta(name, requests('forwarded', 'GET', '4xx', 'bearer'))).toBe(3);
      expect(delta(name, requests('forwarded', 'GET', '4xx', 'basic'))).toBe(3);
      expect(delta(name, requests('list', 'GET', '2xx', 'basic'))).toBe(2);
      expect(delta(name, requests('refresh_tokens', 'GET', '2xx', 'basic'))).toBe(1);
      expect(delta(name, requests('refresh_tokens', 'DELETE', '2xx', 'bearer'))).toBe(1);
      expect(delta(name, requests('provisioning', 'POST', '4xx', 'basic'))).toBe(1);
      expect(delta('realmgate_http_request_duration_seconds_count', { route: 'forwarded' })).toBe(
        9,
      );
    });

    it('counts authentication failures by reason', () => {
      const name = 'realmgate_auth_failures_total';
      expect(delta(name, { scheme: 'bearer', reason: 'missing' })).toBe(1);
      expect(delta(name, { scheme: 'bearer', reason: 'bad_token' })).toBe(1);
      expect(delta(name, { scheme: 'bearer', reason: 'wrong_realm' })).toBe(1);
      expect(delta(name, { scheme: 'bearer', reason: 'revoked' })).toBe(1);
      expect(delta(name, { scheme: 'basic', reason: 'wrong_password' })).toBe(1);
      expect(delta(name, { scheme: 'basic', reason: 'throttled' })).toBe(1);
      expect(delta(name, { scheme: 'basic', reason: 'two_factor' })).toBe(1);
    });

    it('counts cache hits and misses of verified tokens and Basic logins', () => {
      const name = 'realmgate_cache_lookups_total';
      expect(delta(name, { cache: 'verified_token', result: 'hit' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { cache: 'verified_token', result: 'miss' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { cache: 'basic_login', result: 'hit' })).toBeGreaterThanOrEqual(2);
      expect(delta(name, { cache: 'basic_login', result: 'miss' })).toBeGreaterThanOrEqual(1);
    });

    it("counts the gateway's own Keycloak calls by kind and outcome, with their latency", () => {
      const name = 'realmgate_keycloak_requests_total';
      expect(delta(name, { kind: 'grant', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { kind: 'grant', outcome: 'refused' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { kind: 'admin', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { kind: 'introspection', outcome: 'ok' })).toBeGreaterThanOrEqual(1);
      expect(delta(name, { kind: 'grant', outcome: 'unreachable' })).toBe(0);
      expect(
        valueOf(after, 'realmgate_keycloak_requests_total', { kind: 'jwks', outcome: 'ok' }),
      ).toBeGreaterThanOrEqual(1);
      expect(
        delta('realmgate_keycloak_request_duration_seconds_count', { kind: 'grant' }),
      ).toBeGreaterThanOrEqual(2);
    });

    it('counts re-checks and revocations', () => {
      expect(delta('realmgate_token_rechecks_total', { event: 'queued' })).toBeGreaterThan(0);
      const run = ['active', 'inactive'].map((event) =>
        delta('realmgate_token_rechecks_total', { event }),
      );
      expect(run[0]! + run[1]!).toBeGreaterThan(0);
      expect(delta('realmgate_revocations_applied_total', { source: 'local' })).toBe(1);
    });

    it('keeps labels bounded: no user name, organization id, path or token', () => {
      for (const secret of [admin.username, member.username, org, 'ws1', token.slice(-20)]) {
        expect(after.text).not.toContain(secret);
      }
      expect(after.text).not.toMatch(/\{[^}]*="\/[^"]*"/); // no label value is a path
    });
  });

  it('has every metric the example alert rules use', async () => {
    const rules = await readFile(
      new URL('../../ops/prometheus/alerts.yml', import.meta.url),
      'utf8',
    );
    const used = new Set(
      [...rules.matchAll(/\b((?:realmgate|process|nodejs)_[a-z_]+)/g)].map((m) =>
        m[1]!.replace(/_(bucket|sum|count)$/, ''),
      ),
    );
    expect(used.size).toBeGreaterThan(0);
    const declared = families(await scrape(replica));
    for (const name of used) expect(declared, name).toContain(name);
  });

  it('is absent with METRICS_ENABLED=false, on both listeners', async () => {
    const off = await startReplica(18820, { METRICS_ENABLED: 'false' });
    try {
      for (const port of [18820, 18821]) {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`);
        expect(res.status).toBe(404);
        expect(await res.json()).toMatchObject({ result: '404-00000' });
      }
    } finally {
      await off.gateway.close();
    }
  });
});
