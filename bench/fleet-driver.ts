import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiClientIdOf } from '../src/tenancy/identifiers.ts';
import { requestFrom } from '../test/helpers/from-address.ts';
import { startKeycloakFront } from '../test/helpers/keycloak-front.ts';
import { createProvisioner } from './fixtures.ts';
import { FLEET_DEFAULTS, hostAddress, planFleet } from './fleet-plan.ts';
import type { Answer, FleetJob, FleetOptions, JobOutcome } from './fleet-plan.ts';
import type { BenchContext, ModeResult } from './harness.ts';
import { formatFleet, summarizeFleet } from './fleet-report.ts';
import { automationPath } from './scenarios.ts';
import { origin, PORTS } from './settings.ts';
import { loadAverage, startGateway, startServers } from './stack.ts';

/** The fleet scenario (README.md): its gateway, its accounts, and its jobs run against it. */
export interface FleetSpec {
  gateway: string;
  organization: string;
  staleOrganization: string;
  options: FleetOptions;
  jobs: FleetJob[];
  accounts: { username: string; password: string }[];
  /** Per host with a stale job: its account and the old password the job still holds. */
  staleAccounts: { username: string; password: string }[];
}
/** Runs the fleet; each job's outcome, in plan order. */
export async function driveFleet(spec: FleetSpec): Promise<JobOutcome[]> {
  const deadline = AbortSignal.timeout(spec.options.deadlineSeconds * 1000);
  const started = performance.now();
  const waves = [...new Set(spec.jobs.map((job) => job.wave))];
  // Waves start on a schedule, as jobs are started by a clock, not when the last wave ended.
  const running = waves.map(async (wave) => {
    const at = wave * spec.options.waveGapSeconds * 1000 - (performance.now() - started);
    if (at > 0) await sleep(at, undefined, { signal: deadline }).catch(() => undefined);
    const jobs = spec.jobs.filter((job) => job.wave === wave);
    return Promise.all(jobs.map((job) => runJob(spec, job, deadline)));
  });
  return (await Promise.all(running)).flat();
}

async function runJob(spec: FleetSpec, job: FleetJob, deadline: AbortSignal): Promise<JobOutcome> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const send = (method: string, target: string, headers: Record<string, string>, body?: string) =>
    call({ url: spec.gateway + target, method, headers, body, host: job.host, agent, deadline });
  const realm = job.account.stale ? spec.staleOrganization : spec.organization;
  const account = (job.account.stale ? spec.staleAccounts : spec.accounts)[job.account.index]!;
  const forwarded = automationPath(realm);
  const basic = `Basic ${Buffer.from(`${account.username}:${account.password}`).toString('base64')}`;
  const { username, password } = account;
  const grant = { grant_type: 'password', client_id: apiClientIdOf(realm), username, password };
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const login = () =>
    job.kind === 'basic'
      ? send('GET', forwarded, { authorization: basic })
      : send('POST', `/auth/realms/${realm}${TOKEN}`, form, new URLSearchParams(grant).toString());
  const outcome: JobOutcome = { job, logins: [], api: [] };
  try {
    const tries = job.account.stale ? spec.options.staleAttempts : 1;
    let authorization: string | undefined;
    for (let i = 0; i < tries && !deadline.aborted; i++) {
      const answer = await login();
      outcome.logins.push(strip(answer));
      const ok = answer.status >= 200 && answer.status < 300;
      if (ok) authorization = answer.token ? `Bearer ${answer.token}` : basic;
    }
    if (job.account.stale || !authorization) return outcome;
    for (let round = 0; round < spec.options.apiRounds && !deadline.aborted; round++) {
      const headers = { authorization };
      outcome.api.push({ call: 'forwarded', ...strip(await send('GET', forwarded, headers)) });
      const list = `/api/${realm}/platform/workspaces`;
      outcome.api.push({ call: 'list', ...strip(await send('GET', list, headers)) });
    }
    return outcome;
  } finally {
    agent.destroy();
  }
}

/** The answer without the token (it never leaves the driver). */
function strip({ token: _token, ...answer }: Answer & { token?: string }): Answer {
  return answer;
}

/** One request from `host`; never throws: a failure is status 0 with its reason. */
async function call(input: {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  host: string;
  agent: Agent;
  deadline: AbortSignal;
}): Promise<Answer & { token?: string }> {
  const since = performance.now();
  const ms = () => Math.round((performance.now() - since) * 100) / 100;
  const { host, url, deadline: signal, ...options } = input;
  try {
    const { status, headers, json } = await requestFrom(host, url, { ...options, signal });
    const retryAfter = headers['retry-after'];
    // OAuth's `error`, else the platform envelope's `result`.
    const error = [json.error, json.result].find((v): v is string => typeof v === 'string');
    return {
      status,
      ms: ms(),
      ...(status >= 200 && status < 300 ? {} : { error }),
      ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
      ...(typeof json.access_token === 'string' ? { token: json.access_token } : {}),
    };
  } catch (err) {
    return { status: 0, ms: ms(), error: (err as Error).message };
  }
}

const ORGANIZATION = 'bench-fleet';
/** The stale accounts' own organization, so that the front tells their grants apart. */
const STALE_ORGANIZATION = 'bench-stale';

/**
 * `npm run bench -- --fleet` (run.ts): the upstream, one gateway with default settings whose
 * Keycloak is behind a front that records every request (to count the password grants), the
 * accounts, the fleet, its sums. Each right account logs in once at Keycloak first, so the
 * fleet meets a Keycloak that has hashed a password since it started.
 */
export async function fleetMode(context: BenchContext): Promise<ModeResult> {
  const { stack: info, log, note, openDatabase } = context;
  const options = FLEET_DEFAULTS;
  log('starting the upstream and the fleet gateway (default settings; it migrates the database)');
  const front = await startKeycloakFront(info.keycloakUrl);
  try {
    await Promise.all([
      startServers(),
      startGateway({ ...info, keycloakUrl: front.url }, PORTS.gateway),
    ]);
    const p = createProvisioner(info.keycloakUrl, info.secrets, await openDatabase());
    note(`before the fleet: ${loadAverage()}`);
    await p.organization(ORGANIZATION);
    await p.organization(STALE_ORGANIZATION);
    const accounts = await p.users(ORGANIZATION, 'fleet-user-', options.accounts);
    const stale = await p.users(STALE_ORGANIZATION, 'stale-user-', options.staleHosts);
    // The password the job still holds: the account's was changed since.
    const staleAccounts = stale.map((u) => ({
      ...u,
      password: randomBytes(12).toString('base64url'),
    }));
    await Promise.all(accounts.map((account) => p.passwordGrant(account)));
    const jobs = planFleet(options);
    const hosts = Array.from({ length: options.hosts }, (_, i) => hostAddress(i));
    log(`fleet: ${jobs.length} jobs, hosts ${hosts[0]}..${hosts.at(-1)}`);
    front.seen.length = 0;
    const outcomes = await driveFleet({
      gateway: origin(PORTS.gateway),
      organization: ORGANIZATION,
      staleOrganization: STALE_ORGANIZATION,
      options,
      jobs,
      accounts,
      staleAccounts,
    });
    const grantsOf = (realm: string) =>
      front.seen.filter((r) => r.method === 'POST' && r.target.endsWith(`/realms/${realm}${TOKEN}`))
        .length;
    const grants = { right: grantsOf(ORGANIZATION), stale: grantsOf(STALE_ORGANIZATION) };
    const summary = summarizeFleet(outcomes, grants);
    const markdown = formatFleet(summary, hosts, hosts.slice(0, options.staleHosts), options.waves);
    return { tables: [markdown], report: { fleet: { options, summary, outcomes } } };
  } finally {
    await front.close();
  }
}
const TOKEN = '/protocol/openid-connect/token';
