import type { RequestHandler } from 'express';
import { AppError } from '../envelope/errors.ts';
import { workspacesClientIdOf } from '../keycloak/identifiers.ts';
import type { WorkspacesRepo } from '../platform/workspaces.repo.ts';
import { principalOf, type Principal } from './principal.ts';

/** The workspace ids the principal holds a role for in its organization. */
export function workspaceRolesOf(principal: Principal): string[] {
  return principal.clientRoles[workspacesClientIdOf(principal.realm)] ?? [];
}

/**
 * `/api/<org>/workspaces/<ws>/...` needs role `<ws>` of client `<org>-workspaces`. A caller with
 * the role goes on without a database lookup; without it, an unknown workspace is 404
 * `404-00002` and a known one 403 `403-00001`.
 */
export function requireWorkspaceRole(workspaces: WorkspacesRepo): RequestHandler {
  return async (req, res, next) => {
    try {
      await assertWorkspaceRole(principalOf(res), String(req.params.ws), workspaces);
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** Throws 403 `403-00001`, or 404 `404-00002` for an unknown workspace, unless the role is held. */
export async function assertWorkspaceRole(
  principal: Principal,
  workspace: string,
  workspaces: WorkspacesRepo,
): Promise<void> {
  if (workspaceRolesOf(principal).includes(workspace)) return;
  const exists = (await workspaces.find(principal.realm, workspace)) !== undefined;
  throw new AppError(exists ? 'permissionDenied' : 'workspaceNotFound');
}
