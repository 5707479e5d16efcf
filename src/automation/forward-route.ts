import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { assertWorkspaceRole, workspaceRolesOf } from '../auth/authorize.ts';
import type { Principal } from '../auth/principal.ts';
import { assertOrganization } from '../auth/realm-routing.ts';
import { sendError } from '../envelope/error-handler.ts';
import { logWhenFinished } from '../http/access-log.ts';
import { requestIdOf } from '../http/request-id.ts';
import { isWorkspaceId } from '../keycloak/identifiers.ts';
import type { OrganizationDirectory } from '../platform/organization-directory.ts';
import type { WorkspacesRepo } from '../platform/workspaces.repo.ts';
import type { Forwarder } from './forwarder.ts';

/** `/api/<org>/workspaces/<ws>/ita/...`, the route production traffic takes. */
export interface AutomationTarget {
  organization: string;
  workspace: string;
}

/**
 * Recognises the forwarded automation route from the raw URL. Anything unusual (encoded
 * characters, an id outside the allowed alphabet) is left to the express app, which answers it.
 */
export function matchAutomationRoute(url: string | undefined): AutomationTarget | undefined {
  if (url === undefined || !url.startsWith('/api/')) return undefined;
  // Read by position rather than split: this runs on every request.
  const query = url.indexOf('?');
  const path = query < 0 ? url : url.slice(0, query);
  const orgEnd = path.indexOf('/', 5);
  if (orgEnd < 0 || !path.startsWith('/workspaces/', orgEnd)) return undefined;
  const wsStart = orgEnd + '/workspaces/'.length;
  const wsEnd = path.indexOf('/', wsStart);
  if (wsEnd < 0 || !path.startsWith('/ita', wsEnd)) return undefined;
  // `ita` is a whole segment: the path ends there or goes on with `/`.
  if (path.length > wsEnd + 4 && path[wsEnd + 4] !== '/') return undefined;
  const organization = path.slice(5, orgEnd);
  const workspace = path.slice(wsStart, wsEnd);
  if (organization === 'platform' || !isWorkspaceId(workspace)) return undefined;
  return { organization, workspace };
}

export interface ForwardRouteDeps {
  /** Authenticates the Authorization header for a realm (401 AppError on failure). */
  authenticate: (header: string | undefined, realm: string) => Promise<Principal>;
  /** The principal of an already verified token or cached login, when `authenticate` need not run. */
  knownPrincipal: (header: string | undefined, realm: string) => Principal | undefined;
  organizations: OrganizationDirectory;
  workspaces: WorkspacesRepo;
  forward: Forwarder;
  logger: Logger;
}

/**
 * Serves the forwarded automation route straight on the HTTP server, before express: the same
 * realm check, authentication and workspace-role check as every other API call, then the
 * forwarder. Express and its router cost more than the rest of the request together.
 */
export function createForwardRoute(deps: ForwardRouteDeps) {
  return (req: IncomingMessage, res: ServerResponse, target: AutomationTarget): void => {
    const requestId = requestIdOf(req);
    logWhenFinished(req, res, requestId, deps.logger);
    // Most requests carry a token verified or a login cached before: checked here without a
    // promise (the promise chain below costs several percent of this route); anything else
    // takes the full path.
    const known =
      deps.organizations.isKnown(target.organization) &&
      deps.knownPrincipal(req.headers.authorization, target.organization);
    if (known && workspaceRolesOf(known).includes(target.workspace)) {
      deps.forward(req, res, known, requestId);
      return;
    }
    serve(req, res, target, requestId).catch((err: unknown) => {
      if (!res.headersSent) res.setHeader('x-request-id', requestId);
      sendError(res, err, deps.logger);
    });
  };

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    target: AutomationTarget,
    requestId: string,
  ): Promise<void> {
    await assertOrganization(target.organization, deps.organizations);
    const principal = await deps.authenticate(req.headers.authorization, target.organization);
    await assertWorkspaceRole(principal, target.workspace, deps.workspaces);
    deps.forward(req, res, principal, requestId);
  }
}
