import KcAdminClient from '@keycloak/keycloak-admin-client';
import { decodeJwt } from 'jose';
import { AppError } from '../envelope/errors.ts';
import { isHttpStatus } from './admin-client.ts';

/** The gateway's confidential client, present in every realm (see realm-export/). */
export const GATEWAY_CLIENT_ID = 'realmgate-gateway';

/** Renew this long before the service token expires, so no call carries an expiring token. */
const RENEW_BEFORE_MS = 15_000;

export interface ServiceAdmin {
  /** An admin-API client of `realm`, logged in as the gateway's service account. */
  forRealm(realm: string): Promise<KcAdminClient>;
}

/**
 * Admin-API clients per realm, authenticated with the gateway's own client credentials. The
 * service token is cached and renewed before it expires; concurrent renewals share one login.
 */
export function createServiceAdmin(options: {
  keycloakUrl: string;
  clientSecret: string;
  timeoutMs: number;
}): ServiceAdmin {
  const sessions = new Map<string, { client: KcAdminClient; renewAt: number }>();
  const logins = new Map<string, Promise<KcAdminClient>>();

  async function logIn(realm: string): Promise<KcAdminClient> {
    const client = new KcAdminClient({
      baseUrl: options.keycloakUrl,
      realmName: realm,
      timeout: options.timeoutMs,
    });
    try {
      await client.auth({
        grantType: 'client_credentials',
        clientId: GATEWAY_CLIENT_ID,
        clientSecret: options.clientSecret,
      });
    } catch (err) {
      if (isHttpStatus(err, 400) || isHttpStatus(err, 401))
        throw new AppError('gatewayServiceToken', { cause: err });
      throw new AppError('identityProviderUnavailable', { cause: err });
    }
    const exp = Number(decodeJwt(client.accessToken ?? '').exp ?? 0) * 1000;
    sessions.set(realm, { client, renewAt: exp - RENEW_BEFORE_MS });
    return client;
  }

  return {
    forRealm(realm) {
      const session = sessions.get(realm);
      if (session && session.renewAt > Date.now()) return Promise.resolve(session.client);
      let login = logins.get(realm);
      if (!login) {
        login = logIn(realm).finally(() => logins.delete(realm));
        logins.set(realm, login);
      }
      return login;
    },
  };
}

/** Whether `username` in `realm` has an OTP credential (Keycloak's `totp` flag). */
export async function hasTwoFactor(
  admin: ServiceAdmin,
  realm: string,
  username: string,
): Promise<boolean> {
  const client = await admin.forRealm(realm);
  const [user] = await client.users.find({ realm, username, exact: true });
  return user?.totp === true;
}
