import { isHttpStatus, type KeycloakAdmin } from '../keycloak/admin-client.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import type { KeycloakCalls } from '../keycloak/keycloak-calls.ts';
import { GATEWAY_CLIENT_ID } from '../keycloak/service-admin.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import {
  REALM_EVENTS_SETTINGS,
  type KeycloakAdminEvent,
  type KeycloakEventKind,
  type KeycloakUserEvent,
} from './keycloak-event-records.ts';

export type KeycloakEventOf<K extends KeycloakEventKind> = K extends 'user'
  ? KeycloakUserEvent
  : KeycloakAdminEvent;

/** What the pull needs to know of a realm, read once per process. */
export interface RealmFacts {
  /** Keycloak's id of the realm. */
  id: string;
  /** The users the gateway itself acts as in it: their events are the gateway's own calls. */
  gatewayUsers: Set<string>;
  /** Keycloak's id of the realm's gateway client: a realm made again under its name has another. */
  gatewayClientId: string | undefined;
}

/** A realm's events as Keycloak keeps them, read as the gateway's administrator. */
export interface KeycloakEventSource {
  /**
   * Makes the realm save its events as the gateway wants (REALM_EVENTS_SETTINGS), once per
   * process and realm (again for a realm deleted and made again under its name: an
   * organization id used again), and reads its facts; undefined when the realm does not exist.
   */
  prepare(realm: string): Promise<RealmFacts | undefined>;
  /** Events of `kind` with `fromMs <= time <= toMs`, oldest first, at most `max`. */
  page<K extends KeycloakEventKind>(
    realm: string,
    kind: K,
    fromMs: number | undefined,
    toMs: number,
    max: number,
  ): Promise<KeycloakEventOf<K>[]>;
}

const PATH_OF: Record<KeycloakEventKind, string> = { user: 'events', admin: 'admin-events' };

/**
 * Reads events through the bootstrap administrator's session (it may read every realm's
 * events; the realms' own gateway clients may not) and the one client layer: Keycloak's
 * failures are translated there, and a 401 renews the session (admin-session.ts). The library
 * has no `direction` for these lists, so the request is made here, with the session's token.
 */
export function createKeycloakEventSource(deps: {
  calls: KeycloakCalls;
  adminSession: AdminSession;
  /** The user name of the administrator `adminSession` is (KEYCLOAK_ADMIN_USERNAME). */
  adminUsername: string;
}): KeycloakEventSource {
  const { calls, adminSession, adminUsername } = deps;
  const facts = new Map<string, RealmFacts>();

  async function factsOf(admin: KeycloakAdmin, realm: string): Promise<RealmFacts | undefined> {
    const representation = await admin.realms.findOne({ realm });
    if (!representation?.id) return undefined;
    const config = await admin.realms.getConfigEvents({ realm });
    if (!hasSettings(config as Record<string, unknown>)) {
      await admin.realms.updateConfigEvents({ realm }, { ...config, ...REALM_EVENTS_SETTINGS });
    }
    const gatewayUsers = new Set<string>();
    const client = await gatewayClientOf(admin, realm);
    if (client?.id) {
      const account = await admin.clients.getServiceAccountUser({ realm, id: client.id });
      if (account.id) gatewayUsers.add(account.id);
    }
    // The gateway's own administrator acts in every realm from master.
    if (realm === MASTER_REALM) {
      const [self] = await admin.users.find({ realm, username: adminUsername, exact: true });
      if (self?.id) gatewayUsers.add(self.id);
    }
    return { id: representation.id, gatewayUsers, gatewayClientId: client?.id };
  }

  /**
   * Whether `known` are still the facts of `realm`: an organization deleted and made again
   * under its id between two pulls is a new realm (events not saved, other gateway accounts).
   * Master is never made again; an organization's gateway client is one small read.
   */
  async function stillOf(admin: KeycloakAdmin, realm: string, known: RealmFacts) {
    return (await gatewayClientOf(admin, realm))?.id === known.gatewayClientId;
  }

  return {
    prepare(realm) {
      const known = facts.get(realm);
      if (known && realm === MASTER_REALM) return Promise.resolve(known);
      return adminSession.run(async (admin) => {
        try {
          if (known && (await stillOf(admin, realm, known))) return known;
          facts.delete(realm);
          const found = await factsOf(admin, realm);
          if (found) facts.set(realm, found);
          return found;
        } catch (err) {
          if (isHttpStatus(err, 404)) return undefined;
          throw err;
        }
      });
    },
    page(realm, kind, fromMs, toMs, max) {
      const query = new URLSearchParams({
        dateTo: String(toMs),
        first: '0',
        max: String(max),
        direction: 'asc',
      });
      if (fromMs !== undefined) query.set('dateFrom', String(fromMs));
      const path = `/admin/realms/${encodeURIComponent(realm)}/${PATH_OF[kind]}?${query.toString()}`;
      return adminSession.run((admin) =>
        calls.admin(async (nodeUrl) => {
          const res = await fetch(`${nodeUrl}${path}`, {
            headers: { authorization: `Bearer ${admin.accessToken ?? ''}` },
            signal: AbortSignal.timeout(calls.timeoutMs),
          });
          if (!res.ok) {
            // As the admin client's errors carry it: the layer and the session read the status.
            throw Object.assign(new Error(`Keycloak answered ${res.status} to ${path}`), {
              response: { status: res.status },
            });
          }
          return (await res.json()) as KeycloakEventOf<typeof kind>[];
        }, true),
      );
    },
  };
}

async function gatewayClientOf(admin: KeycloakAdmin, realm: string) {
  const [client] = await admin.clients.find({ realm, clientId: GATEWAY_CLIENT_ID });
  return client;
}

/** Whether a realm's events configuration already has every value the gateway sets. */
function hasSettings(config: Record<string, unknown>): boolean {
  return Object.entries(REALM_EVENTS_SETTINGS).every(([name, wanted]) => {
    const value = config[name];
    if (!Array.isArray(wanted)) return value === wanted;
    return Array.isArray(value) && wanted.every((type) => value.includes(type));
  });
}
