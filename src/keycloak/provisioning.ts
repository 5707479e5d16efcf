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
  /**
   * OTP secret in base32, as authenticator apps show it (uppercase, no padding). Keycloak keeps
   * it as given and decodes it when checking a code (`secretEncoding: BASE32`), so any bytes work.
   */
  otpSecretBase32?: string;
}

/**
 * Creates the user unless it exists, then (re)sets its password and grants the workspace roles.
 * An OTP secret, if given, replaces any OTP credential an existing user had. Returns the user's id.
 */
export async function ensureUser(admin: KeycloakAdmin, spec: UserSpec): Promise<string> {
  const { realm, username } = spec;
  const otp = otpCredentialOf(spec);
  let [user] = await admin.users.find({ realm, username, exact: true });
  if (!user) {
    await admin.users.create({ realm, username, enabled: true, credentials: otp ? [otp] : [] });
    [user] = await admin.users.find({ realm, username, exact: true });
  } else if (otp && user.id) {
    await replaceOtpCredential(admin, realm, user.id, otp);
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

/** The workspace ids (roles of `<org>-workspaces`, not the `_<ws>-admin` ones) a user holds. */
export async function workspaceRolesOf(
  admin: KeycloakAdmin,
  organizationId: string,
  userId: string,
): Promise<string[]> {
  const clientUuid = await clientUuidOf(
    admin,
    organizationId,
    workspacesClientIdOf(organizationId),
  );
  const roles = await admin.users.listClientRoleMappings({
    realm: organizationId,
    id: userId,
    clientUniqueId: clientUuid,
  });
  return roles
    .map((role) => role.name ?? '')
    .filter(isWorkspaceId)
    .sort();
}

type OtpCredential = ReturnType<typeof otpCredential>;

function otpCredentialOf(spec: UserSpec): OtpCredential | undefined {
  if (spec.otpSecretBase32) return otpCredential(spec.otpSecretBase32, 'BASE32');
  if (spec.otpSecret) return otpCredential(spec.otpSecret);
  return undefined;
}

/**
 * The admin API has no "add credential" call, but a user update carrying `credentials` adds
 * them. The new credential goes in before the old ones go, so the user is never left without
 * a second factor; the old ones are relabelled first because Keycloak refuses two OTP
 * credentials with the same label.
 */
async function replaceOtpCredential(
  admin: KeycloakAdmin,
  realm: string,
  userId: string,
  otp: OtpCredential,
): Promise<void> {
  const old = (await admin.users.getCredentials({ realm, id: userId })).filter(
    (credential) => credential.type === 'otp' && credential.id,
  );
  for (const credential of old) {
    await admin.users.updateCredentialLabel(
      { realm, id: userId, credentialId: credential.id! },
      `replaced-${credential.id!}`,
    );
  }
  // The full representation: a partial one could reset profile fields on update.
  const user = await admin.users.findOne({ realm, id: userId });
  if (!user) throw new Error(`user ${userId} vanished from realm ${realm}`);
  await admin.users.update({ realm, id: userId }, { ...user, credentials: [otp] });
  for (const credential of old) {
    await admin.users.deleteCredential({ realm, id: userId, credentialId: credential.id! });
  }
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

async function clientUuidOf(
  admin: KeycloakAdmin,
  realm: string,
  clientId: string,
): Promise<string> {
  const [client] = await admin.clients.find({ realm, clientId });
  if (!client?.id) throw new Error(`client ${clientId} not found in realm ${realm}`);
  return client.id;
}
