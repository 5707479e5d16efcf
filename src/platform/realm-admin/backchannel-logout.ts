import type ClientRepresentation from '@keycloak/keycloak-admin-client/lib/defs/clientRepresentation.js';
import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { isRealmMissing } from '../../keycloak/realm-gone.ts';
import { backchannelClientsOf } from '../../auth-proxy/backchannel-logout.ts';

/**
 * The client attributes that make Keycloak post a logout token to `url` when a session of the
 * client ends, naming the session (`sid`) as well as the user.
 */
export function backchannelLogoutAttributes(url: string): Record<string, string> {
  return {
    'backchannel.logout.url': url,
    'backchannel.logout.session.required': 'true',
  };
}

/** A realm representation (a new realm's) whose clients of the gateway carry the attributes. */
export function withBackchannelLogout(
  realm: string,
  representation: Record<string, unknown>,
  url: string,
): Record<string, unknown> {
  const ours = backchannelClientsOf(realm);
  const clients = representation.clients as ClientRepresentation[] | undefined;
  return {
    ...representation,
    clients: clients?.map((client) =>
      client.clientId !== undefined && ours.includes(client.clientId)
        ? { ...client, attributes: { ...client.attributes, ...backchannelLogoutAttributes(url) } }
        : client,
    ),
  };
}

/**
 * Points an existing realm's clients of the gateway at `url`, changing only a client whose
 * attributes differ (one read of the realm's clients, a write only where needed). Resolves to
 * whether anything changed; a client the realm lacks is skipped (a realm not made by realmgate),
 * and so is a realm deleted since it was listed. Safe to repeat, and from several replicas at
 * once.
 */
export async function pointRealmAtGateway(
  admin: KeycloakAdmin,
  realm: string,
  url: string,
): Promise<boolean> {
  const wanted = backchannelLogoutAttributes(url);
  const ours = backchannelClientsOf(realm);
  let clients: ClientRepresentation[];
  try {
    clients = await admin.clients.find({ realm });
  } catch (err) {
    if (isRealmMissing(err)) return false;
    throw err;
  }
  let changed = false;
  for (const client of clients) {
    if (!client.id || client.clientId === undefined || !ours.includes(client.clientId)) continue;
    const current = client.attributes ?? {};
    if (Object.entries(wanted).every(([name, value]) => current[name] === value)) continue;
    await admin.clients.update(
      { realm, id: client.id },
      { ...client, attributes: { ...current, ...wanted } },
    );
    changed = true;
  }
  return changed;
}

/**
 * Every realm's name and id, as Keycloak lists them in brief (without each realm's whole
 * representation: one light call however many realms there are).
 */
export async function listRealms(
  admin: KeycloakAdmin,
): Promise<{ id: string | undefined; realm: string }[]> {
  return (await admin.realms.find({ briefRepresentation: true })).flatMap(({ id, realm }) =>
    realm ? [{ id, realm }] : [],
  );
}
