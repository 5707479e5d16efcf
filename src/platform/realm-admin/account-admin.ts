import type { AccountAdmin } from '../../auth/account-admin.ts';
import type { ServiceAdmin } from '../../keycloak/service-admin.ts';
import { clientRolesOf, groupMembers, roleOf } from './role-changes.ts';
import { isDpopRequired } from './token-lifetimes.ts';
import { loginBlockOf, longestAccessTokenSeconds, usernameOfEmail } from './users.ts';
import { endedSessionIds } from './user-sessions.ts';

/** The auth layers' questions about accounts (auth/account-admin.ts), through the gateway's own client. */
export function createAccountAdmin(serviceAdmin: ServiceAdmin): AccountAdmin {
  return {
    loginBlockOf: (realm, username) => loginBlockOf(serviceAdmin, realm, username),
    usernameOfEmail: (realm, email) => usernameOfEmail(serviceAdmin, realm, email),
    loginWithEmailAllowed: (realm) =>
      serviceAdmin.run(realm, async (admin) => {
        const settings = await admin.realms.findOne({ realm });
        // Keycloak's default when the realm does not say.
        return settings?.loginWithEmailAllowed ?? true;
      }),
    usernameOf: (realm, userId) =>
      serviceAdmin.run(realm, async (admin) => {
        const user = await admin.users.findOne({ realm, id: userId });
        return user?.username;
      }),
    longestAccessTokenSeconds: (realm) =>
      serviceAdmin.run(realm, (admin) => longestAccessTokenSeconds(admin, realm)),
    groupMembers: (realm, groupId) =>
      serviceAdmin.run(realm, (admin) => groupMembers(admin, realm, groupId)),
    roleOf: (realm, role) => serviceAdmin.run(realm, (admin) => roleOf(admin, realm, role)),
    clientRolesOf: (realm, clientUuid) =>
      serviceAdmin.run(realm, (admin) => clientRolesOf(admin, realm, clientUuid)),
    dpopRequired: (realm) => serviceAdmin.run(realm, (admin) => isDpopRequired(admin, realm)),
    endOfflineSession: (realm, sessionId) =>
      serviceAdmin.run(realm, async (admin) => {
        await admin.realms.deleteSession({ realm, session: sessionId, isOffline: true });
      }),
    endedSessions: (realm, userId, sessionIds) =>
      endedSessionIds(serviceAdmin, realm, userId, sessionIds),
  };
}
