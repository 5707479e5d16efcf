import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import {
  grantRoles,
  otpCredentialOf,
  workspaceRolesNamed,
  type OtpCredential,
  type UserSpec,
} from '../platform/realm-admin/provisioning.ts';

/**
 * Creates the user unless it exists, then (re)sets its password and grants the workspace roles;
 * an OTP secret, if given, replaces any OTP credential an existing user had. Returns the user's id.
 *
 * For the demo seed and the tests only, which must be able to run again over their own users: it
 * lives with the demo, above every layer the API is built from (.dependency-cruiser.js). Never
 * reachable from the API: resetting an existing user's password is an account takeover
 * there (the API calls `createUser`, which refuses existing users).
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
  await grantRoles(
    admin,
    realm,
    user.id,
    await workspaceRolesNamed(admin, realm, spec.workspaceRoles ?? []),
  );
  return user.id;
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
