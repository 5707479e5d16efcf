import type { IncomingMessage } from 'node:http';
import type { Forwarding } from './forwarding.ts';
import type { RequestTarget } from './request-target.ts';
import type { Route } from './route.ts';

/**
 * Where a request that must be made on the listener's own address should go instead, or
 * undefined when it may go on. Used by the edge on the admin listener only.
 */
export type CanonicalHost = (
  req: IncomingMessage,
  target: RequestTarget,
  route: Route,
) => string | undefined;

/**
 * The admin listener's rule for console pages: Keycloak accepts the console's login only from
 * the address it knows (`ADMIN_PUBLIC_URL`), so a console page asked for under another name of
 * the listener (`127.0.0.1`, the machine's name) would end on Keycloak's "Invalid parameter:
 * redirect_uri" page. Such a GET or HEAD is redirected (302) to `origin` plus the canonical path
 * that `canonicalPathOf` gives for its route (the edge's reading of its path), with the query as sent. The address is always built from
 * the configuration, never from the request's Host: no open redirect. `canonicalPathOf` may also
 * name a different path for the right host (a console address without its trailing slash).
 */
export function createCanonicalHost(options: {
  origin: string;
  forwarding: Forwarding;
  canonicalPathOf(route: Route): string | undefined;
}): CanonicalHost {
  const origin = new URL(options.origin);
  const base = origin.origin;
  return (req, target, route) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
    const path = options.canonicalPathOf(route);
    if (path === undefined) return undefined;
    if (path === target.path && hostOf(req, options.forwarding, origin.protocol) === origin.host)
      return undefined;
    return `${base}${path}${target.query}`;
  };
}

/** The host the client asked for (a trusted proxy's `X-Forwarded-Host`, else `Host`), normalised. */
function hostOf(
  req: IncomingMessage,
  forwarding: Forwarding,
  protocol: string,
): string | undefined {
  const host = forwarding.forwarded(req).host.split(',')[0]!.trim();
  if (host === '') return undefined;
  try {
    return new URL(`${protocol}//${host}`).host;
  } catch {
    return undefined;
  }
}
