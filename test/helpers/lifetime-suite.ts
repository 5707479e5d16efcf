import { afterAll, beforeAll, expect } from 'vitest';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth } from './api.ts';
import { createUser, keycloakAdmin, postToken } from './keycloak.ts';
import { closeTestDb } from './platform.ts';
import { startReplica, type Replica } from './replica.ts';
import { aheadClock, type TestClock } from './test-clock.ts';
import { testEnv } from './test-env.ts';

/**
 * What the suites share that show how long a refusal lasts against the realm's access-token
 * lifetime (lengthened-lifetime, revocation-lifetime): replicas on which only the revocation list
 * can refuse a token, a lifetime changed through the gateway or behind its back, and the
 * console's admin calls through a replica's admin listener.
 */

/**
 * Replicas at `ports` with the re-check off (REVOCATION_CHECK_SECONDS=off), so only the
 * revocation list refuses a token, all on one clock the suite moves past lifetimes; started
 * before the suite's tests (with `settings()`, read then as the test stack is known then) and
 * closed after them, with the test database.
 */
export function replicasWithoutRecheck(
  ports: number[],
  settings: () => Record<string, string> = () => ({}),
): { clock: TestClock; replica: (index?: number) => Replica } {
  const clock = aheadClock();
  const started: Replica[] = [];
  beforeAll(async () => {
    const overrides = { REVOCATION_CHECK_SECONDS: 'off', ...settings() };
    started.push(
      ...(await Promise.all(ports.map((port) => startReplica(port, overrides, undefined, clock)))),
    );
  });
  afterAll(async () => {
    await Promise.all(started.map((replica) => replica.gateway.close()));
    await closeTestDb();
  });
  return {
    clock,
    replica: (index = 0) => {
      const replica = started[index];
      if (replica === undefined) throw new Error(`replica ${index} has not started`);
      return replica;
    },
  };
}

/** The status `replica` answers a GET of `path` with `token` as Bearer. */
export async function bearerStatus(replica: Replica, path: string, token: string): Promise<number> {
  const res = await fetch(`${replica.url}${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return res.status;
}

/** The base URL of `replica`'s admin listener, where the console reaches Keycloak. */
export function adminUrlOf(replica: Replica): string {
  return `http://127.0.0.1:${replica.config.ADMIN_PORT}`;
}

/** A master administrator's access token from `admin-cli`, as the console logs in. */
export async function consoleToken(replica: Replica): Promise<string> {
  const login = await postToken(
    `${adminUrlOf(replica)}/auth`,
    'master',
    new URLSearchParams({
      client_id: 'admin-cli',
      grant_type: 'password',
      username: testEnv().keycloakAdminUsername,
      password: testEnv().keycloakAdminPassword,
    }).toString(),
  );
  expect(login.status).toBe(200);
  return String(login.json.access_token);
}

/** The organization's API client's access-token lifetime set through `replica`'s API. */
export async function setLifetimeThroughGateway(
  replica: Replica,
  org: string,
  seconds: number,
): Promise<void> {
  const admin = await createUser('master');
  const patched = await fetch(`${replica.url}/api/platform/organizations/${org}/token-lifetimes`, {
    method: 'PATCH',
    headers: { authorization: basicAuth(admin), 'content-type': 'application/json' },
    body: JSON.stringify({ access_token_lifespan: seconds }),
  });
  await patched.arrayBuffer();
  expect(patched.status).toBe(200);
}

/**
 * The organization's API client's access-token lifetime set straight at Keycloak, as in its
 * console: the gateway sees nothing of the change.
 */
export async function setLifetimeAtKeycloak(org: string, seconds: number): Promise<void> {
  const admin = await keycloakAdmin();
  const [client] = await admin.clients.find({ realm: org, clientId: apiClientIdOf(org) });
  await admin.clients.update(
    { realm: org, id: client!.id! },
    { ...client, attributes: { ...client!.attributes, 'access.token.lifespan': String(seconds) } },
  );
}

/**
 * The organization's API client's access-token lifetime set in Keycloak through `replica`'s admin
 * listener, as the console saves a client: its representation read, then sent back changed.
 */
export async function setLifetimeThroughAdminListener(
  replica: Replica,
  org: string,
  seconds: number,
): Promise<void> {
  const clients = `${adminUrlOf(replica)}/auth/admin/realms/${org}/clients`;
  const authorization = `Bearer ${await consoleToken(replica)}`;
  const found = await fetch(`${clients}?clientId=${encodeURIComponent(apiClientIdOf(org))}`, {
    headers: { authorization },
  });
  expect(found.status).toBe(200);
  const [client] = (await found.json()) as { id: string; attributes?: Record<string, string> }[];
  const updated = await fetch(`${clients}/${client!.id}`, {
    method: 'PUT',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({
      ...client,
      attributes: { ...client!.attributes, 'access.token.lifespan': String(seconds) },
    }),
  });
  await updated.arrayBuffer();
  expect(updated.status).toBe(204);
}
