import { expect } from 'vitest';
import type { LoadRequest } from '../../bench/load.ts';
import { WORKSPACE, type BenchUser } from '../../bench/fixtures.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth } from '../helpers/api.ts';
import type { GatewayProcess } from './gateway-process.ts';
import type { HaStack } from './stack.ts';

/** What the HA phases ask: a replica, or HAProxy in front of both. */
export interface Endpoint {
  readonly url: string;
}

/** The forwarded automation route (AUTOMATION_UPSTREAM_URL), the steady load's route. */
export const automationPath = (org: string) => `/api/${org}/workspaces/${WORKSPACE}/ita/operations`;
/** A list endpoint, read from the platform database. */
export const platformPath = (org: string) => `/api/${org}/platform/workspaces`;
export const tokensPath = (org: string) => `/api/${org}/platform/users/_current/refresh_tokens`;

export interface Answer {
  status: number;
  /** The Retry-After header, or null. */
  retryAfter: string | null;
}

/** One request, its body read and dropped. */
export async function answerOf(
  at: Endpoint,
  path: string,
  authorization: string,
  method = 'GET',
): Promise<Answer> {
  const res = await fetch(`${at.url}${path}`, {
    method,
    headers: { authorization },
    signal: AbortSignal.timeout(10_000),
  });
  await res.arrayBuffer();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

export async function statusOf(
  at: Endpoint,
  path: string,
  authorization: string,
  method = 'GET',
): Promise<number> {
  return (await answerOf(at, path, authorization, method)).status;
}

/** A token request through the `/auth` proxy: what clients do. */
export async function tokenRequest(at: Endpoint, org: string, form: Record<string, string>) {
  const res = await fetch(`${at.url}/auth/realms/${org}/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({ client_id: apiClientIdOf(org), ...form }),
    signal: AbortSignal.timeout(10_000),
  });
  const json = (await res.json().catch(() => ({}))) as Record<string, string>;
  return {
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    accessToken: json.access_token,
    refreshToken: json.refresh_token,
  };
}

/** The password grant of `user` (a new login), its answer as it came. */
export function passwordGrantRequest(at: Endpoint, user: BenchUser, scope = 'openid') {
  return tokenRequest(at, user.realm, {
    grant_type: 'password',
    scope,
    username: user.username,
    password: user.password,
  });
}

/** A password grant that must succeed: its tokens. */
export async function passwordGrant(at: Endpoint, user: BenchUser, scope = 'openid') {
  const grant = await passwordGrantRequest(at, user, scope);
  if (grant.status !== 200) throw new Error(`password grant of ${user.username}: ${grant.status}`);
  return { accessToken: grant.accessToken!, refreshToken: grant.refreshToken! };
}

/**
 * The steady load's requests: each user's fresh Bearer token and its Basic login, both used
 * once on each replica first (verified, cached), on the forwarded automation route. Empties the
 * upstream's record afterwards.
 */
export async function warmLoadRequests(stack: HaStack, users: BenchUser[]): Promise<LoadRequest[]> {
  const [A, B] = stack.replicas;
  const requests: LoadRequest[] = [];
  for (const user of users) {
    const { accessToken } = await passwordGrant(A, user);
    requests.push({ path: automationPath(user.realm), authorization: `Bearer ${accessToken}` });
    requests.push({ path: automationPath(user.realm), authorization: basicAuth(user) });
  }
  for (const gateway of [A, B]) {
    for (const request of requests) {
      expect(await statusOf(gateway, request.path, request.authorization!)).toBe(200);
    }
  }
  stack.upstream.seen.length = 0;
  return requests;
}

async function metricsOf(gateway: GatewayProcess): Promise<string> {
  return (await fetch(`${gateway.adminUrl}/metrics`)).text();
}

/** Password grants the replica has asked Keycloak for, from its own metrics. */
export async function grantsOf(gateway: GatewayProcess): Promise<number> {
  let grants = 0;
  for (const match of (await metricsOf(gateway)).matchAll(
    /^realmgate_keycloak_requests_total\{kind="grant",[^}]*\} (\d+)/gm,
  )) {
    grants += Number(match[1]);
  }
  return grants;
}

/** 1 when the replica sends calls to Keycloak node `index`, 0 when it has taken it out. */
export async function nodeUpOn(gateway: GatewayProcess, index: number): Promise<number> {
  const pattern = new RegExp(`^realmgate_keycloak_node_up\\{node="${index}"\\} (\\d+)`, 'm');
  return Number(pattern.exec(await metricsOf(gateway))?.[1] ?? Number.NaN);
}

/** The replica's `/readyz` on its admin listener: status, and how it reports `dependency`. */
export async function readinessOf(gateway: GatewayProcess, dependency: string): Promise<string> {
  const res = await fetch(`${gateway.adminUrl}/readyz`, { signal: AbortSignal.timeout(5000) });
  const body = (await res.json().catch(() => ({}))) as { data?: Record<string, unknown> };
  const part = body.data?.[dependency];
  const status =
    typeof part === 'object' && part !== null ? (part as { status?: unknown }).status : part;
  return `${res.status} (${dependency} ${String(status)})`;
}
