import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The request id of the request whose work is running, for code far from the request object:
 * the gateway's own Keycloak calls and the `/auth` proxy read it here and send it on as
 * `X-Request-Id`, so one request can be followed through the gateway's, Keycloak's and the
 * automation service's logs. The store is the id itself: entering costs no allocation.
 */
const current = new AsyncLocalStorage<string>();

/**
 * Runs `work(...args)` as part of the request `requestId`: what it starts, synchronously or
 * later (promises, timers, sockets), sees that id. The edge enters it for every request that
 * may call Keycloak, the forwarded route included: its admission learns only as it runs
 * whether it must ask (about 0.2 µs of CPU per request, measured).
 */
export function inRequest<A extends unknown[], R>(
  requestId: string,
  work: (...args: A) => R,
  ...args: A
): R {
  return current.run(requestId, work, ...args);
}

/** The id of the request whose work is running, or undefined outside any request. */
export function currentRequestId(): string | undefined {
  return current.getStore();
}

/**
 * Runs `work` outside any request: for background work a request merely starts (the scheduled
 * key-set fetches of a realm it was the first to use), which must not be logged under that
 * request's id.
 */
export function outsideRequest<R>(work: () => R): R {
  return current.exit(work);
}
