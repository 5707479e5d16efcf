import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { apiTargetOf, type Admission } from '../auth/admission.ts';
import type { Principal } from '../auth/principal.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import { inRequest } from '../edge/request-context.ts';
import type { RequestTarget } from '../edge/request-target.ts';
import { sendError } from '../envelope/error-handler.ts';
import type { Forwarder } from './forwarder.ts';

/**
 * Whether the edge hands this request to the forwarded automation route:
 * `/api/<org>/workspaces/<ws>/ita` and below, the route production traffic takes. Read from the
 * decoded segments, the same ones the admission reads.
 */
export function isAutomationPath(segments: readonly string[]): boolean {
  return (
    segments.length >= 5 &&
    segments[0] === 'api' &&
    segments[2] === 'workspaces' &&
    segments[4] === 'ita' &&
    segments[1] !== 'platform'
  );
}

/**
 * Serves the forwarded automation route on the HTTP server, before express (express and its
 * router cost more than the rest of the request together): the `/api` admission, then the
 * forwarder, which sends the path the admission read. A principal the admission already knows
 * is served without a promise; anything else, every refusal included, takes `admit`.
 */
export function createForwardRoute(deps: {
  admission: Admission;
  forwarding: Forwarding;
  forward: Forwarder;
  logger: Logger;
}) {
  const { admission, forward } = deps;
  const fail = (res: ServerResponse, requestId: string, err: unknown) => {
    if (!res.headersSent) res.setHeader('x-request-id', requestId);
    sendError(res, err, deps.logger);
  };

  return (req: IncomingMessage, res: ServerResponse, target: RequestTarget, requestId: string) => {
    try {
      const api = apiTargetOf(target.segments)!;
      const known = admission.peek(api, req.headers.authorization);
      if (known) {
        forward(req, res, known, target, requestId);
        return;
      }
      // The full admission may call Keycloak (a login, a key set): under the request's id.
      void inRequest(requestId, () =>
        admission
          .admit(api, req.headers.authorization, deps.forwarding.clientAddress(req))
          .then((principal: Principal) => forward(req, res, principal, target, requestId))
          .catch((err: unknown) => fail(res, requestId, err)),
      );
    } catch (err) {
      // Nothing a client sends may end the process: whatever throws here is a 500 for this one request.
      fail(res, requestId, err);
    }
  };
}
