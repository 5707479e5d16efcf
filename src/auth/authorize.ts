import { WORKSPACE_LIST_ROLES, workspacesClientIdOf } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';

/**
 * The workspace ids the principal holds a role for in its organization, narrowed to its
 * token's reach when it has one: what a member's workspace list shows, and what the upstream is
 * told it holds.
 */
export function workspaceRolesOf(principal: Principal): string[] {
  const held = principal.clientRoles[workspacesClientIdOf(principal.realm)] ?? [];
  const reach = principal.reach?.workspaces;
  return reach ? held.filter((workspace) => reach.includes(workspace)) : held;
}

/** `/api/<org>/workspaces/<ws>/...` needs role `<ws>` of client `<org>-workspaces`. */
export function holdsWorkspace(principal: Principal, workspace: string): boolean {
  return workspaceRolesOf(principal).includes(workspace);
}

/**
 * Whether the organization's workspace list shows `workspace` to the principal: one it holds the
 * role of, or any for an organization manager (`WORKSPACE_LIST_ROLES`), within its token's reach
 * either way.
 */
export function listsWorkspace(principal: Principal, workspace: string): boolean {
  if (!principal.realmRoles.some((role) => WORKSPACE_LIST_ROLES.includes(role))) {
    return holdsWorkspace(principal, workspace);
  }
  const reach = principal.reach?.workspaces;
  return reach === undefined || reach.includes(workspace);
}

/**
 * Whether the caller's refresh-token list shows its session `sessionId`: every one of its user's,
 * but to a token narrowed to workspaces its own only (the others are its user's account, no
 * workspace of it).
 */
export function listsSession(principal: Principal, sessionId: string): boolean {
  return principal.reach?.workspaces === undefined || principal.sessionId === sessionId;
}
