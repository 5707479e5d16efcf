import type { Logger } from 'pino';
import type { Admission } from '../auth/admission.ts';
import type { EdgeRoute } from '../edge/edge.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import { inRequest } from '../edge/request-context.ts';
import { admitted } from '../edge/request-scope.ts';
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
 * is served without a promise; anything else, every refusal included, takes `admit`.
 */
export function createForwardRoute(deps: {
  admission: Admission;
  forwarding: Forwarding;
  forward: Forwarder;
  logger: Logger;
}): EdgeRoute {
  const { admission, forward } = deps;
  const fail = (res: Parameters<EdgeRoute>[1], requestId: string, err: unknown) => {
    if (!res.headersSent) res.setHeader('x-request-id', requestId);
    sendError(res, err, deps.logger);
  };

  return (req, res, scope) => {
    try {
      const authorization = req.headers.authorization;
      const known = admission.peek(scope.route, authorization, req);
      if (known) {
        forward(req, res, admitted(scope, known));
        return;
      }
      // The full admission may call Keycloak (a login, a key set): under the request's id.
      void inRequest(scope.requestId, () =>
        admission
          .admit(scope.route, authorization, deps.forwarding.clientAddress(req), req)
          .then((principal) => forward(req, res, admitted(scope, principal)))
          .catch((err: unknown) => fail(res, scope.requestId, err)),
      );
    } catch (err) {
      // Nothing a client sends may end the process: whatever throws here is a 500 for this one request.
      fail(res, scope.requestId, err);
    }
  };
}
