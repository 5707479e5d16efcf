import type KcAdminClient from '@keycloak/keycloak-admin-client';
import { decodeJwt } from 'jose';
import { AppError } from '../envelope/errors.ts';
import { createAdminClient, httpStatusOf } from './admin-client.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { keycloakError } from './keycloak-failures.ts';

/** The gateway's confidential client, present in every realm (see realm-export/). */
export const GATEWAY_CLIENT_ID = 'realmgate-gateway';

/** Renew this long before the service token expires, so no call carries an expiring token. */
const RENEW_BEFORE_MS = 15_000;

export interface ServiceAdmin {
  /** An admin-API client of `realm`, logged in as the gateway's service account. */
  forRealm(realm: string): Promise<KcAdminClient>;
  /**
   * Runs `work` with the realm's client. Its requests fail as the client layer translates them
   * (503/504/502); 401 becomes `401-00001` and drops the session (Keycloak no longer accepts
   * its token); Keycloak's other 4xx answers pass through for the caller to interpret.
   */
  run<T>(realm: string, work: (client: KcAdminClient) => Promise<T>): Promise<T>;
}

/**
 * Admin-API clients per realm, authenticated with the gateway's own client credentials, on the
 * client layer. The service token is cached and renewed before it expires; concurrent renewals
 * share one login.
 */
export function createServiceAdmin(options: {
  calls: KeycloakCalls;
  clientSecret: string;
}): ServiceAdmin {
  const sessions = new Map<string, { client: KcAdminClient; renewAt: number }>();
  const logins = new Map<string, Promise<KcAdminClient>>();

  async function logIn(realm: string): Promise<KcAdminClient> {
    const client = createAdminClient(options.calls, realm);
    try {
      await client.auth({
        grantType: 'client_credentials',
        clientId: GATEWAY_CLIENT_ID,
        clientSecret: options.clientSecret,
      });
    } catch (err) {
      // Keycloak refused the gateway's credentials (the layer has translated everything else).
      const status = httpStatusOf(err);
      if (status !== undefined && status >= 400 && status < 500) {
        throw new AppError('gatewayServiceToken', { cause: err });
      }
      throw err;
    }
    sessions.set(realm, { client, renewAt: expiryOf(client.accessToken) - RENEW_BEFORE_MS });
    return client;
  }

  function forRealm(realm: string): Promise<KcAdminClient> {
    const session = sessions.get(realm);
    if (session && session.renewAt > Date.now()) return Promise.resolve(session.client);
    let login = logins.get(realm);
    if (!login) {
      login = logIn(realm).finally(() => logins.delete(realm));
      logins.set(realm, login);
    }
    return login;
  }

  return {
    forRealm,
    async run(realm, work) {
      const client = await forRealm(realm);
      try {
        return await work(client);
      } catch (err) {
        if (httpStatusOf(err) !== 401) throw err;
        if (sessions.get(realm)?.client === client) sessions.delete(realm);
        throw new AppError('gatewayServiceToken', { cause: err });
      }
    },
  };
}

/** When the service token expires (epoch ms); a token that is no JWT is a bad answer (502). */
function expiryOf(accessToken: string | undefined): number {
  try {
    return Number(decodeJwt(accessToken ?? '').exp ?? 0) * 1000;
  } catch (err) {
    throw keycloakError('bad_answer', err);
  }
}

/** Whether `username` in `realm` has an OTP credential (Keycloak's `totp` flag). */
export async function hasTwoFactor(
  admin: ServiceAdmin,
  realm: string,
  username: string,
): Promise<boolean> {
  const [user] = await admin.run(realm, (client) =>
    client.users.find({ realm, username, exact: true }),
  );
  return user?.totp === true;
}
