import { AUDIT_READER_ROLE } from '../../src/tenancy/identifiers.ts';
import { keycloakAdmin, userIdOf, type TestUser } from './keycloak.ts';

/** Gives `user` its organization's audit-log reader role (made in the realm when missing). */
export async function grantReaderRole(user: TestUser): Promise<void> {
  const kc = await keycloakAdmin();
  await kc.roles.create({ realm: user.realm, name: AUDIT_READER_ROLE }).catch(() => undefined);
  const role = await kc.roles.findOneByName({ realm: user.realm, name: AUDIT_READER_ROLE });
  await kc.users.addRealmRoleMappings({
    realm: user.realm,
    id: await userIdOf(user),
    roles: [{ id: role!.id!, name: role!.name! }],
  });
}
