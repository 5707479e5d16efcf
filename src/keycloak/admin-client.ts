import { AsyncLocalStorage } from 'node:async_hooks';
import KcAdminClient from '@keycloak/keycloak-admin-client';
import { currentRequestId } from '../edge/request-context.ts';
import { traceHeadersNow } from '../tracing/trace-scope.ts';
import { createKeycloakCalls, type KeycloakCalls } from './keycloak-calls.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

export type KeycloakAdmin = KcAdminClient;

/** Resource members that build requests when the client is constructed, not requests. */
const NOT_REQUESTS = new Set(['makeRequest', 'makeUpdateRequest']);

/**
 * The client library names its requests by what they do: these only read (`GET`), and may be
 * tried again on another node after a timeout. Every other request is retried only when it
 * could not connect.
 */
const READ_REQUEST = /^(find|get|list|count)/;

/** The node the current admin request runs on, with several nodes (see `createAdminClient`). */
const nodeOfRequest = new AsyncLocalStorage<string>();

/**
 * An admin-API client of `realmName` whose every request (and login) runs through the client
 * layer: timed out after the layer's `timeoutMs`, counted by its observer, and failing with the
 * layer's 503/504/502; Keycloak's 4xx answers pass through (see `isHttpStatus`). With several
 * nodes each request picks its node: the client's `baseUrl` is read inside the request from
 * the async context the layer runs it in, so concurrent requests never see each other's node.
 * A token from one node is valid on the others (the realm keys live in the shared database).
 * A request made for a client's request carries its `X-Request-Id`; the client's own logins
 * (shared by every request that needs a token meanwhile) carry none.
 */
export function createAdminClient(calls: KeycloakCalls, realmName: string): KeycloakAdmin {
  const client = new KcAdminClient({
    baseUrl: calls.keycloakUrl,
    realmName,
    timeout: calls.timeoutMs,
  });
  // The library reads these options for each admin request it builds, inside the async context
  // the request runs in (its login reads its own copy, set once: no request id there).
  client.getRequestOptions = () => {
    const requestId = currentRequestId();
    const trace = traceHeadersNow();
    if (requestId === undefined && trace === undefined) return undefined;
    const headers: Record<string, string> = {};
    if (requestId !== undefined) headers['x-request-id'] = requestId;
    for (let i = 0; trace && i < trace.length; i += 2) headers[trace[i]!] = trace[i + 1]!;
    return { headers };
  };
  const several = calls.nodes.all.length > 1;
  const onNode = <T>(work: () => Promise<T>) =>
    several ? (nodeUrl: string) => nodeOfRequest.run(nodeUrl, work) : work;
  if (several) {
    Object.defineProperty(client, 'baseUrl', {
      get: () => nodeOfRequest.getStore() ?? calls.keycloakUrl,
      set: () => undefined,
    });
  }
  // Each resource (users, clients, realms, ...) holds its requests as own function members.
  for (const resource of Object.values(client) as unknown[]) {
    if (typeof resource !== 'object' || resource === null) continue;
    const members = resource as Record<string, unknown>;
    for (const [name, member] of Object.entries(members)) {
      if (typeof member !== 'function' || NOT_REQUESTS.has(name)) continue;
      const send = member as (...args: unknown[]) => Promise<unknown>;
      const read = READ_REQUEST.test(name);
      members[name] = (...args: unknown[]) =>
        calls.admin(
          onNode(() => send.apply(resource, args)),
          read,
        );
    }
  }
  const auth = client.auth.bind(client);
  client.auth = (credentials) => calls.admin(onNode(() => auth(credentials)));
  return client;
}

/**
 * An admin-API client logged in as Keycloak's bootstrap administrator (master realm,
 * `admin-cli`). Used for provisioning realms and users, never on the request path.
 */
export async function loginAsBootstrapAdmin(options: {
  /** One URL, or several nodes of one Keycloak (see `KEYCLOAK_URL`). */
  keycloakUrl: string | readonly string[];
  username: string;
  password: string;
  timeoutMs: number;
  /** The gateway's client layer; without it, one of its own (no observer). */
  calls?: KeycloakCalls;
}): Promise<KeycloakAdmin> {
  const calls = options.calls ?? createKeycloakCalls(options);
  const admin = createAdminClient(calls, MASTER_REALM);
  await admin.auth({
    grantType: 'password',
    clientId: 'admin-cli',
    username: options.username,
    password: options.password,
  });
  return admin;
}

/**
 * Every item of a listing the admin API answers page by page (`first`, `max`): pages of
 * `pageSize` until a shorter one.
 */
export async function everyPage<T>(
  pageSize: number,
  page: (first: number, max: number) => Promise<T[]>,
): Promise<T[]> {
  const items: T[] = [];
  for (let first = 0; ; first += pageSize) {
    const got = await page(first, pageSize);
    items.push(...got);
    if (got.length < pageSize) return items;
  }
}

/**
 * The most admin calls one piece of work (a page of users, a check across every realm of
 * master) keeps in flight: all at once, a thousand users or realms would be a thousand
 * requests to Keycloak together, beside every organization's logins.
 */
export const ADMIN_CALLS_AT_ONCE = 8;

/** `work` of each item, `ADMIN_CALLS_AT_ONCE` at a time; the results in the items' order. */
export async function mapFewAtATime<T, R>(
  items: readonly T[],
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  await fewAtATime(items, async (item, index) => {
    results[index] = await work(item);
    return false;
  });
  return results;
}

/**
 * Whether `test` holds for some item, asked `ADMIN_CALLS_AT_ONCE` at a time: once one holds,
 * no further item is asked.
 */
export async function someFewAtATime<T>(
  items: readonly T[],
  test: (item: T) => Promise<boolean>,
): Promise<boolean> {
  let found = false;
  await fewAtATime(items, async (item) => {
    // Set, never cleared: a call still in flight may answer false after one answered true.
    if (await test(item)) found = true;
    return found;
  });
  return found;
}

/**
 * Runs `work` for the items, `ADMIN_CALLS_AT_ONCE` at a time in their order, until every item
 * is done, one answers true, or one fails (that failure is thrown): no item starts after that.
 */
async function fewAtATime<T>(
  items: readonly T[],
  work: (item: T, index: number) => Promise<boolean>,
): Promise<void> {
  const next = items.entries();
  let done = false;
  const worker = async () => {
    for (const [index, item] of next) {
      if (done) return;
      try {
        if (await work(item, index)) done = true;
      } catch (err) {
        done = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(ADMIN_CALLS_AT_ONCE, items.length) }, worker));
}

/** True when the admin client failed with the given HTTP status (e.g. 409 for "exists"). */
export function isHttpStatus(err: unknown, status: number): boolean {
  return httpStatusOf(err) === status;
}

/**
 * Whether a 404 is Keycloak's own (its JSON `error`, e.g. a role or realm it does not have),
 * not a proxy's page while Keycloak is away behind it, which says nothing of what is there.
 */
export function isKeycloakNotFound(err: unknown): boolean {
  if (!isHttpStatus(err, 404)) return false;
  const data = (err as { responseData?: unknown }).responseData;
  return (
    typeof data === 'object' &&
    data !== null &&
    typeof (data as { error?: unknown }).error === 'string'
  );
}

/** The HTTP status of Keycloak's answer an admin-client call failed with, if it got one. */
export function httpStatusOf(err: unknown): number | undefined {
  const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : undefined;
}
