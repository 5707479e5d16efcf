import type KcAdminClient from '@keycloak/keycloak-admin-client';
import { TtlLru } from '../cache/ttl-lru.ts';
import { createAdminClient } from './admin-client.ts';
import { renewingSession, type AdminSession } from './admin-session.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';

/** The gateway's confidential client, present in every realm (see realm-export/). */
export const GATEWAY_CLIENT_ID = 'realmgate-gateway';

export interface ServiceAdmin {
  /** An admin-API client of `realm`, logged in as the gateway's service account. */
  forRealm(realm: string): Promise<KcAdminClient>;
  /**
   * Runs `work` with the realm's client, as `AdminSession.run` does (admin-session.ts): 401
   * becomes `401-00001` and drops the session.
   */
  run<T>(realm: string, work: (client: KcAdminClient) => Promise<T>): Promise<T>;
  /**
   * `realm` was deleted: its session goes with it. Its token would be refused by a realm made
   * again under the name (other keys), and the first call there would fail for it.
   */
  forgetRealm(realm: string): void;
}

/**
 * How many realms' sessions are kept, as many as the organizations the directory holds: a realm
 * named by a caller need not exist, and the least recently used makes way (a login again).
 */
const MAX_REALMS = 10_000;

/**
 * Admin-API clients per realm, authenticated with the gateway's own client credentials, on the
 * client layer: one renewing session (admin-session.ts) per realm, for up to `maxRealms` realms.
 */
export function createServiceAdmin(options: {
  calls: KeycloakCalls;
  clientSecret: string;
  maxRealms?: number;
}): ServiceAdmin {
  // Kept until evicted: a session renews its own login.
  const sessions = new TtlLru<AdminSession>(options.maxRealms ?? MAX_REALMS);
  const sessionOf = (realm: string): AdminSession => {
    let session = sessions.get(realm);
    if (!session) {
      session = renewingSession(async () => {
        const client = createAdminClient(options.calls, realm);
        await client.auth({
          grantType: 'client_credentials',
          clientId: GATEWAY_CLIENT_ID,
          clientSecret: options.clientSecret,
        });
        return client;
      });
      sessions.set(realm, session, Number.POSITIVE_INFINITY);
    }
    return session;
  };
  return {
    forRealm: (realm) => sessionOf(realm).get(),
    run: (realm, work) => sessionOf(realm).run(work),
    forgetRealm: (realm) => {
      sessions.delete(realm);
    },
  };
}
