import { workspacesClientIdOf } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';

/**
 * The workspace ids the principal holds a role for in its organization, narrowed to its
 * token's reach when it has one: what the lists show, and what the upstream is told it holds.
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
