import type { IncomingMessage } from 'node:http';
import type { Principal } from '../tenancy/principal.ts';
import type { RequestTarget } from './request-target.ts';
import type { Route } from './route.ts';

/**
 * What the gateway knows about one request, in the one object the edge makes for it
 * (oauth2-proxy's `RequestScope` is the model): its id, its path as the edge accepted and read
 * it, and the caller once the admission has established who it is.
 */
export interface RequestScope {
  readonly requestId: string;
  readonly target: RequestTarget;
  readonly route: Route;
  /** Set by the admission; undefined before it, and on routes that read no credentials. */
  principal: Principal | undefined;
  /** Why the admission refused the request, when it did (for the audit log). */
  refusal?: unknown;
  /**
   * Whom the admission refused, when it verified their credentials before a later step refused
   * the request (its reach, a role): the audit log names them. Set on a refusal only.
   */
  refusedCaller?: Principal | undefined;
  /**
   * The result code of the gateway's failure that cut a streamed answer after its head was sent
   * (http/route-table.ts), set before its connection closes, for the audit log; none when the
   * client went.
   */
  cutResult?: string | undefined;
}

/** A scope whose caller the admission has established. */
export interface AdmittedScope extends RequestScope {
  principal: Principal;
}

/** Records the admitted caller in the request's scope. */
export function admitted(scope: RequestScope, principal: Principal): AdmittedScope {
  scope.principal = principal;
  return scope as AdmittedScope;
}

// A property of the request itself: express hands its routes the same object.
const SCOPE = Symbol('realmgate.scope');
type ScopedRequest = IncomingMessage & { [SCOPE]?: RequestScope };

/** Gives the request its scope, for the express routes (the forwarded route is handed it). */
export function enterScope(req: IncomingMessage, scope: RequestScope): void {
  (req as ScopedRequest)[SCOPE] = scope;
}

/** The scope the edge gave this request (every request reaching express has one). */
export function scopeOf(req: IncomingMessage): RequestScope {
  const scope = (req as ScopedRequest)[SCOPE];
  if (!scope) throw new Error('scopeOf called on a request the edge did not admit');
  return scope;
}

/** The path the edge accepted for this request. */
export function targetOf(req: IncomingMessage): RequestTarget {
  return scopeOf(req).target;
}

/** The caller the admission established for this request. */
export function principalOf(req: IncomingMessage): Principal {
  const principal = scopeOf(req).principal;
  if (!principal) throw new Error('principalOf called on a route without authentication');
  return principal;
}
