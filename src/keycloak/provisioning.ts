import { readFile } from 'node:fs/promises';
import type { KeycloakAdmin } from './admin-client.ts';
import { isHttpStatus } from './admin-client.ts';
import { isOrganizationId, isWorkspaceId, workspacesClientIdOf } from './identifiers.ts';

const ORGANIZATION_TEMPLATE = new URL(
  '../../realm-export/organization.template.json',
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

/** Creates the organization's realm from the template unless it exists. Safe to repeat. */
export async function ensureOrganizationRealm(
  admin: KeycloakAdmin,
  values: { organizationId: string; organizationName: string; gatewayClientSecret: string },
): Promise<void> {
  if (await admin.realms.findOne({ realm: values.organizationId })) return;
  try {
    await admin.realms.create(await renderOrganizationRealm(values));
  } catch (err) {
    if (!isHttpStatus(err, 409)) throw err;
  }
}

/** Creates the workspace's client roles `<ws>` and `_<ws>-admin` unless they exist. */
export async function ensureWorkspaceRoles(
  admin: KeycloakAdmin,
  organizationId: string,
  workspaceId: string,
): Promise<void> {
  if (!isWorkspaceId(workspaceId))
    throw new Error(`invalid workspace id: ${JSON.stringify(workspaceId)}`);
  const clientUuid = await clientUuidOf(
    admin,
    organizationId,
    workspacesClientIdOf(organizationId),
  );
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
}

/**
 * Creates the user unless it exists, then (re)sets its password and grants the workspace roles.
 * Returns the user's id.
 */
export async function ensureUser(admin: KeycloakAdmin, spec: UserSpec): Promise<string> {
  const { realm, username } = spec;
  let [user] = await admin.users.find({ realm, username, exact: true });
  if (!user) {
    await admin.users.create({
      realm,
      username,
      enabled: true,
      credentials: spec.otpSecret ? [otpCredential(spec.otpSecret)] : [],
    });
    [user] = await admin.users.find({ realm, username, exact: true });
  }
  if (!user?.id) throw new Error(`user ${username} was not created in realm ${realm}`);
  await admin.users.resetPassword({
    realm,
    id: user.id,
    credential: { type: 'password', value: spec.password, temporary: false },
  });
  if (spec.workspaceRoles?.length) {
    const clientUuid = await clientUuidOf(admin, realm, workspacesClientIdOf(realm));
    const roles = await Promise.all(
      spec.workspaceRoles.map((roleName) =>
        admin.clients.findRole({ realm, id: clientUuid, roleName }),
      ),
    );
    await admin.users.addClientRoleMappings({
      realm,
      id: user.id,
      clientUniqueId: clientUuid,
      roles: roles.map((role, i) => {
        if (!role?.id || !role.name)
          throw new Error(`no workspace role ${spec.workspaceRoles![i]}`);
        return { id: role.id, name: role.name };
      }),
    });
  }
  return user.id;
}

/** Keycloak's stored form of a TOTP credential (RFC 6238: SHA-1, 6 digits, 30 s). */
function otpCredential(secret: string) {
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
    }),
  };
}

async function clientUuidOf(
  admin: KeycloakAdmin,
  realm: string,
  clientId: string,
): Promise<string> {
  const [client] = await admin.clients.find({ realm, clientId });
  if (!client?.id) throw new Error(`client ${clientId} not found in realm ${realm}`);
  return client.id;
}
