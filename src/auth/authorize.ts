import { workspacesClientIdOf } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';

/** The workspace ids the principal holds a role for in its organization. */
export function workspaceRolesOf(principal: Principal): string[] {
  return principal.clientRoles[workspacesClientIdOf(principal.realm)] ?? [];
}

/** `/api/<org>/workspaces/<ws>/...` needs role `<ws>` of client `<org>-workspaces`. */
export function holdsWorkspace(principal: Principal, workspace: string): boolean {
  return workspaceRolesOf(principal).includes(workspace);
}
