/** The realm of administrators, reached through `/api/platform/...`. */
export const MASTER_REALM = 'master';

/**
 * The realm role that lets an organization's user read its audit log (docs/audit.md): the
 * reference platform's name for its audit-log readers. Made with each new organization realm.
 */
export const AUDIT_READER_ROLE = '_og-audit-log';

/**
 * The realm roles whose holder sees every workspace of its organization in the workspace list
 * (compat.md: "all for an organization manager"): the reference platform's authorities to
 * maintain workspaces or their roles, which its role `_organization-manager` is made of (Keycloak
 * puts a composite's roles in the token). Seeing a workspace listed is not entering it.
 */
export const WORKSPACE_LIST_ROLES: readonly string[] = ['_og-ws-mt', '_og-ws-role-mt'];

/**
 * Organization ids name Keycloak realms and appear in paths, so they are kept to a small, safe
 * alphabet: lowercase letters, digits, `-` and `_`, starting with a letter, at most 36 long.
 * `master` is the administrators' realm and `platform` is the administrators' path segment.
 */
export const RESERVED_ORGANIZATION_IDS = [
  MASTER_REALM,
  'platform',
  'admin',
  'auth',
  'api',
] as const;
/** The whole rule as one pattern, reserved ids included, so the API description can carry it. */
export const ORGANIZATION_ID = new RegExp(
  `^(?!(?:${RESERVED_ORGANIZATION_IDS.join('|')})$)[a-z][a-z0-9_-]{0,35}$`,
);

/** Workspace ids name client roles (`<ws>` and `_<ws>-admin`) and appear in paths. */
export const WORKSPACE_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,35}$/;

/** Whether `id` can be an organization id. */
export function isOrganizationId(id: string): boolean {
  return ORGANIZATION_ID.test(id);
}

/** Whether `id` can be a workspace id. */
export function isWorkspaceId(id: string): boolean {
  return WORKSPACE_ID.test(id);
}

/** The public client organization users log in with (spec 4.1). */
export function apiClientIdOf(realm: string): string {
  return realm === MASTER_REALM ? '_platform-api' : `_${realm}-api`;
}

/** The confidential client whose roles are the organization's workspaces. */
export function workspacesClientIdOf(organizationId: string): string {
  return `${organizationId}-workspaces`;
}

/**
 * A realm's token issuer (`iss`): Keycloak's realm as clients reach it, through the gateway's
 * `/auth` under `PUBLIC_URL` (Keycloak's hostname setting makes its tokens name it).
 */
export function realmIssuer(publicUrl: string, realm: string): string {
  return `${publicUrl}/auth/realms/${realm}`;
}
