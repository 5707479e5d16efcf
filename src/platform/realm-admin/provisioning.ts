import { readFile } from 'node:fs/promises';
import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { isHttpStatus, mapFewAtATime } from '../../keycloak/admin-client.ts';
import { AppError } from '../../envelope/errors.ts';
import { withBackchannelLogout } from './backchannel-logout.ts';
import { ensureGatewayAudience } from './gateway-audience.ts';
import { madeOrPresent } from './made-or-present.ts';
import {
  AUDIT_READER_ROLE,
  WORKSPACE_LIST_ROLES,
  isOrganizationId,
  isWorkspaceId,
  workspacesClientIdOf,
} from '../../tenancy/identifiers.ts';

const ORGANIZATION_TEMPLATE = new URL(
  '../../../realm-export/organization.template.json',
  import.meta.url,
);

/**
 * Fills the organization realm template. Values are inserted JSON-escaped, so a display name
 * cannot break out of its string.
 */
export async function renderOrganizationRealm(values: {
  organizationId: string;
  organizationName: string;
  gatewayClientSecret: string;
}): Promise<Record<string, unknown>> {
  if (!isOrganizationId(values.organizationId)) {
    throw new Error(`invalid organization id: ${JSON.stringify(values.organizationId)}`);
  }
  const template = await readFile(ORGANIZATION_TEMPLATE, 'utf8');
  const filled = template.replace(/\{\{(\w+)\}\}/g, (match, name: string) => {
    const value = (values as Record<string, string>)[name];
    if (value === undefined) throw new Error(`template placeholder without value: ${match}`);
    return JSON.stringify(value).slice(1, -1);
  });
  return JSON.parse(filled) as Record<string, unknown>;
}

/**
 * The realm roles an organization's realm is made with, that the gateway's rules name (an
 * administrator gives them in Keycloak): its audit-log readers, its managers (each of the
 * authorities that shows every workspace in the list).
 */
const ORGANIZATION_ROLES: ReadonlyArray<{ name: string; description: string }> = [
  { name: AUDIT_READER_ROLE, description: "Reads the organization's audit log through realmgate" },
  ...WORKSPACE_LIST_ROLES.map((name) => ({
    name,
    description: "Organization manager: sees every workspace in realmgate's workspace list",
  })),
];

/**
 * Creates the organization's realm from the template unless it exists, then its roles
 * (`ORGANIZATION_ROLES`) unless they exist, and the gateway in its tokens' audience
 * (gateway-audience.ts). Safe to repeat and to race (made-or-present.ts): a realm made by an
 * earlier call that stopped after it (Keycloak finishing a creation the gateway had stopped waiting for) still
 * gets the roles. With `backchannelLogoutUrl`, Keycloak announces the ends of its sessions there
 * (backchannel-logout.ts); `realmSettings` are the realm's besides the template's, set in the
 * call that makes it (the audit log's event saving: from the realm's first sign-in on).
 * Resolves to the realm's id when this call made it with `backchannelLogoutUrl` (so aligned as
 * realm-alignment.ts would align it), else to undefined.
 */
export async function ensureOrganizationRealm(
  admin: KeycloakAdmin,
  values: {
    organizationId: string;
    organizationName: string;
    gatewayClientSecret: string;
    backchannelLogoutUrl?: string;
    realmSettings?: Readonly<Record<string, unknown>>;
  },
): Promise<string | undefined> {
  let made = false;
  if (!(await admin.realms.findOne({ realm: values.organizationId }))) {
    const { backchannelLogoutUrl: url, realmSettings, ...templateValues } = values;
    const rendered = { ...(await renderOrganizationRealm(templateValues)), ...realmSettings };
    await madeOrPresent(
      () =>
        admin.realms.create(
          url === undefined
            ? rendered
            : withBackchannelLogout(values.organizationId, rendered, url),
        ),
      async () => Boolean(await admin.realms.findOne({ realm: values.organizationId })),
    );
    made = url !== undefined;
  }
  for (const role of ORGANIZATION_ROLES) {
    await madeOrPresent(
      () => admin.roles.create({ realm: values.organizationId, ...role }),
      async () =>
        Boolean(await admin.roles.findOneByName({ realm: values.organizationId, name: role.name })),
    );
  }
  await ensureGatewayAudience(admin, values.organizationId);
  return made ? (await admin.realms.findOne({ realm: values.organizationId }))?.id : undefined;
}

/** Creates the workspace's client roles `<ws>` and `_<ws>-admin` unless they exist. */
export async function ensureWorkspaceRoles(
  admin: KeycloakAdmin,
  organizationId: string,
  workspaceId: string,
): Promise<void> {
  if (!isWorkspaceId(workspaceId))
    throw new Error(`invalid workspace id: ${JSON.stringify(workspaceId)}`);
  const clientUuid = await workspacesClientUuidOf(admin, organizationId);
  for (const roleName of [workspaceId, `_${workspaceId}-admin`]) {
    const existing = await admin.clients.findRole({
      realm: organizationId,
      id: clientUuid,
      roleName,
    });
    if (existing) continue;
    try {
      await admin.clients.createRole({ realm: organizationId, id: clientUuid, name: roleName });
    } catch (err) {
      if (!isHttpStatus(err, 409)) throw err;
    }
  }
}

export interface UserSpec {
  realm: string;
  username: string;
  password: string;
  /** Roles of client `<org>-workspaces`, i.e. workspace ids. */
  workspaceRoles?: string[];
  /** Raw Keycloak OTP secret; the user then needs a one-time password to log in. */
  otpSecret?: string;
  /**
   * OTP secret in base32, as authenticator apps show it (uppercase, no padding). Keycloak keeps
   * it as given and decodes it when checking a code (`secretEncoding: BASE32`), so any bytes work.
   */
  otpSecretBase32?: string;
}

/**
 * Creates a new user with its password, OTP credential and workspace roles, and returns its id.
 * A username Keycloak already holds (in any letter case: Keycloak lowercases usernames) answers
 * 409 `409-00001` and changes nothing: this is what the provisioning API calls, so that an
 * administrator cannot take over an existing account (Keycloak's bootstrap administrator, a
 * service account) by "creating" it again.
 */
export async function createUser(admin: KeycloakAdmin, spec: UserSpec): Promise<string> {
  const { realm, username } = spec;
  // Resolved first, so that a missing role fails before any user exists.
  const roles = await workspaceRolesNamed(admin, realm, spec.workspaceRoles ?? []);
  if ((await admin.users.find({ realm, username, exact: true })).length > 0) {
    throw new AppError('userExists');
  }
  const otp = otpCredentialOf(spec);
  let id: string;
  try {
    // One call creates the user with both credentials or, on any refusal, nothing at all.
    ({ id } = await admin.users.create({
      realm,
      username,
      enabled: true,
      credentials: [passwordCredential(spec.password), ...(otp ? [otp] : [])],
    }));
  } catch (err) {
    // Another request created it since our look-up, or it differs from one only in case.
    if (isHttpStatus(err, 409)) throw new AppError('userExists', { cause: err });
    throw err;
  }
  try {
    await grantRoles(admin, realm, id, roles);
  } catch (err) {
    // Leave no half-made user behind: a repeat of this call would meet it as "exists".
    await admin.users.del({ realm, id }).catch(() => undefined);
    throw err;
  }
  return id;
}

/**
 * The client roles of `<realm>-workspaces` with these names. One missing is `404-00002`: its
 * workspace is being deleted (the delete removes the roles first, then the row).
 */
export async function workspaceRolesNamed(
  admin: KeycloakAdmin,
  realm: string,
  names: readonly string[],
): Promise<WorkspaceRoles | undefined> {
  if (names.length === 0) return undefined;
  const clientUuid = await workspacesClientUuidOf(admin, realm);
  const found = await mapFewAtATime(names, (roleName) =>
    admin.clients.findRole({ realm, id: clientUuid, roleName }),
  );
  const roles = found.map((role, i) => {
    if (!role?.id || !role.name) {
      throw new AppError('workspaceNotFound', {
        cause: new Error(`no workspace role ${names[i]}`),
      });
    }
    return { id: role.id, name: role.name };
  });
  return { clientUuid, roles };
}

export interface WorkspaceRoles {
  clientUuid: string;
  roles: { id: string; name: string }[];
}

/** Adds the roles to the user's mappings (roles it holds already stay). */
export async function grantRoles(
  admin: KeycloakAdmin,
  realm: string,
  userId: string,
  roles: WorkspaceRoles | undefined,
): Promise<void> {
  if (!roles) return;
  await admin.users.addClientRoleMappings({
    realm,
    id: userId,
    clientUniqueId: roles.clientUuid,
    roles: roles.roles,
  });
}

export type OtpCredential = ReturnType<typeof otpCredential>;

/** The OTP credential a spec asks for, if any. */
export function otpCredentialOf(spec: UserSpec): OtpCredential | undefined {
  if (spec.otpSecretBase32) return otpCredential(spec.otpSecretBase32, 'BASE32');
  if (spec.otpSecret) return otpCredential(spec.otpSecret);
  return undefined;
}

function passwordCredential(password: string) {
  return { type: 'password', value: password, temporary: false };
}

/** Keycloak's stored form of a TOTP credential (RFC 6238: SHA-1, 6 digits, 30 s). */
function otpCredential(secret: string, secretEncoding?: 'BASE32') {
  return {
    type: 'otp',
    userLabel: 'authenticator',
    secretData: JSON.stringify({ value: secret }),
    credentialData: JSON.stringify({
      subType: 'totp',
      digits: 6,
      counter: 0,
      period: 30,
      algorithm: 'HmacSHA1',
      ...(secretEncoding ? { secretEncoding } : {}),
    }),
  };
}

/**
 * The id of client `<org>-workspaces`, which holds the workspace roles; undefined when the
 * realm has no such client (a realm that is gone answers Keycloak's 404).
 */
export async function findWorkspacesClientUuid(
  admin: KeycloakAdmin,
  organizationId: string,
): Promise<string | undefined> {
  const clientId = workspacesClientIdOf(organizationId);
  const [client] = await admin.clients.find({ realm: organizationId, clientId });
  return client?.id;
}

/** The id of client `<org>-workspaces`; throws when the realm has none. */
export async function workspacesClientUuidOf(
  admin: KeycloakAdmin,
  organizationId: string,
): Promise<string> {
  const clientUuid = await findWorkspacesClientUuid(admin, organizationId);
  if (!clientUuid) {
    throw new Error(
      `client ${workspacesClientIdOf(organizationId)} not found in realm ${organizationId}`,
    );
  }
  return clientUuid;
}
