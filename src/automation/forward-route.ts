import type { Logger } from 'pino';
import type { ServerResponse } from 'node:http';
import { admitRequest, type Admission } from '../auth/admission.ts';
import type { EdgeRoute } from '../edge/edge.ts';
import type { RequestScope } from '../edge/request-scope.ts';
import type { RouteDeclaration } from '../edge/route.ts';
import { sendError } from '../envelope/error-handler.ts';
import type { Forwarder } from './forwarder.ts';

/**
 * The forwarded automation route's entry: `/api/<org>/workspaces/<ws>/ita` and every path below
 * it, any method (the route production traffic takes), when `AUTOMATION_UPSTREAM_URL` is set.
 */
export const FORWARDED_ROUTE: RouteDeclaration = {
  method: 'get',
  path: '/api/{organization_id}/workspaces/{workspace_id}/ita',
  metricsClass: 'forwarded',
  forwarded: true,
};

/**
 * Serves the forwarded automation route (`/api/<org>/workspaces/<ws>/ita` and below, the route
 * production traffic takes; FORWARDED_ROUTE) on the HTTP server, before express (express and
 * its router cost more than the rest of the request together): the `/api` admission, then the
 * forwarder, which sends the path the admission read. A principal the admission already knows
 * is served without a promise; every refusal is answered in the envelope.
 */
export function createForwardRoute(deps: {
  admission: Admission;
  forward: Forwarder;
  logger: Logger;
}): EdgeRoute {
  const { admission, forward } = deps;
  // Whatever throws after the admission (the forwarder included) is answered here too: nothing
  // a client sends may end the process, it is a 500 for this one request.
  const fail = (res: ServerResponse, scope: RequestScope, err: unknown) => {
    if (!res.headersSent) res.setHeader('x-request-id', scope.requestId);
    sendError(res, admission.challenged(err, scope.route.realm), deps.logger);
  };
  return (req, res, scope) => admitRequest(admission, req, res, scope, forward, fail);
}
