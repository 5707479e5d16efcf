import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { assertWorkspaceRole } from '../auth/authorize.ts';
import type { Principal } from '../auth/principal.ts';
import { assertOrganization } from '../auth/realm-routing.ts';
import { sendError } from '../envelope/error-handler.ts';
import { beginAccessLog } from '../http/access-log.ts';
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
  const query = url.indexOf('?');
  const segments = (query < 0 ? url : url.slice(0, query)).split('/');
  // ['', 'api', org, 'workspaces', ws, 'ita', ...]
  if (segments.length < 6 || segments[3] !== 'workspaces' || segments[5] !== 'ita')
    return undefined;
  const organization = segments[2]!;
  const workspace = segments[4]!;
  if (organization === 'platform' || !isWorkspaceId(workspace)) return undefined;
  return { organization, workspace };
}

export interface ForwardRouteDeps {
  /** Authenticates the Authorization header for a realm (401 AppError on failure). */
  authenticate: (header: string | undefined, realm: string) => Promise<Principal>;
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
    beginAccessLog(req, res, deps.logger);
    serve(req, res, target).catch((err: unknown) => sendError(res, err, deps.logger));
  };

  async function serve(
    req: IncomingMessage,
    res: ServerResponse,
    target: AutomationTarget,
  ): Promise<void> {
    await assertOrganization(target.organization, deps.organizations);
    const principal = await deps.authenticate(req.headers.authorization, target.organization);
    await assertWorkspaceRole(principal, target.workspace, deps.workspaces);
    deps.forward(req, res, principal);
  }
}
