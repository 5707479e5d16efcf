import { z } from 'zod';
import { AppError } from '../../envelope/errors.ts';
import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { apiClientIdOf } from '../../tenancy/identifiers.ts';

/** Upper bound of every lifetime: ten years is already far beyond any sane token. */
export const MAX_LIFETIME_SECONDS = 10 * 365 * 24 * 60 * 60;

const LIFETIME_DESCRIPTIONS = {
  access_token_lifespan: 'Access token lifespan of the API client, in seconds',
  client_session_idle_timeout: 'Client session idle of the API client, in seconds',
  client_session_max_lifespan: 'Client session max of the API client, in seconds',
  offline_session_idle_timeout: 'Offline session idle of the realm, in seconds',
  offline_session_max_lifespan: 'Offline session max of the realm, in seconds',
  offline_session_max_lifespan_enabled: 'Offline session max limited',
  dpop_bound_access_tokens:
    'DPoP required for the API client (RFC 9449; the console\'s "OAuth 2.0 DPoP Bound Access ' +
    'Tokens Enabled"): Keycloak refuses a token request without a proof, so every token is ' +
    "bound to its client's key",
} as const;

/** As Keycloak holds them: 0 where neither the client nor the realm sets a value. */
const current = (key: keyof typeof LIFETIME_DESCRIPTIONS) =>
  z.int().min(0).describe(LIFETIME_DESCRIPTIONS[key]);
const wanted = (key: keyof typeof LIFETIME_DESCRIPTIONS) =>
  z.int().min(1).max(MAX_LIFETIME_SECONDS).optional().describe(LIFETIME_DESCRIPTIONS[key]);

/**
 * The lifetimes spec 5.3 lets an administrator change, in seconds. Access token and client
 * session values live on the realm's API client (`_platform-api` / `_<org>-api`); the offline
 * (refresh token) values are realm settings. The schema documents the answer; nothing parses it.
 */
export const tokenLifetimesSchema = z
  .object({
    access_token_lifespan: current('access_token_lifespan'),
    client_session_idle_timeout: current('client_session_idle_timeout'),
    client_session_max_lifespan: current('client_session_max_lifespan'),
    offline_session_idle_timeout: current('offline_session_idle_timeout'),
    offline_session_max_lifespan: current('offline_session_max_lifespan'),
    offline_session_max_lifespan_enabled: z
      .boolean()
      .describe(LIFETIME_DESCRIPTIONS.offline_session_max_lifespan_enabled),
    dpop_bound_access_tokens: z.boolean().describe(LIFETIME_DESCRIPTIONS.dpop_bound_access_tokens),
  })
  .meta({ id: 'TokenLifetimes' });

export type TokenLifetimes = z.infer<typeof tokenLifetimesSchema>;

/** A partial update of {@link TokenLifetimes}; unknown keys are refused, `{}` changes nothing. */
export const tokenLifetimesPatchSchema = z
  .strictObject({
    access_token_lifespan: wanted('access_token_lifespan'),
    client_session_idle_timeout: wanted('client_session_idle_timeout'),
    client_session_max_lifespan: wanted('client_session_max_lifespan'),
    offline_session_idle_timeout: wanted('offline_session_idle_timeout'),
    offline_session_max_lifespan: wanted('offline_session_max_lifespan'),
    offline_session_max_lifespan_enabled: z
      .boolean()
      .optional()
      .describe(LIFETIME_DESCRIPTIONS.offline_session_max_lifespan_enabled),
    dpop_bound_access_tokens: z
      .boolean()
      .optional()
      .describe(LIFETIME_DESCRIPTIONS.dpop_bound_access_tokens),
  })
  .meta({ id: 'TokenLifetimesPatch' });

export type TokenLifetimesPatch = z.infer<typeof tokenLifetimesPatchSchema>;

const CLIENT_ATTRIBUTES = {
  access_token_lifespan: 'access.token.lifespan',
  client_session_idle_timeout: 'client.session.idle.timeout',
  client_session_max_lifespan: 'client.session.max.lifespan',
} as const;

/**
 * The API client's DPoP switch, "true" or "false": Keycloak keeps an attribute left out of an
 * update, so switching off writes "false".
 */
const DPOP_ATTRIBUTE = 'dpop.bound.access.tokens';

/**
 * Reads the lifetimes in effect. A client attribute that is unset (or 0/-1) means Keycloak
 * falls back to the realm, so the realm's value is reported then.
 */
export async function getTokenLifetimes(
  admin: KeycloakAdmin,
  realm: string,
): Promise<TokenLifetimes> {
  const [settings, client] = await Promise.all([
    realmSettingsOf(admin, realm),
    apiClientOf(admin, realm),
  ]);
  const attribute = (name: string) => positiveOrUndefined(client.attributes?.[name]);
  return {
    access_token_lifespan:
      attribute(CLIENT_ATTRIBUTES.access_token_lifespan) ?? settings.accessTokenLifespan ?? 0,
    client_session_idle_timeout:
      attribute(CLIENT_ATTRIBUTES.client_session_idle_timeout) ??
      positiveOrUndefined(settings.clientSessionIdleTimeout) ??
      settings.ssoSessionIdleTimeout ??
      0,
    client_session_max_lifespan:
      attribute(CLIENT_ATTRIBUTES.client_session_max_lifespan) ??
      positiveOrUndefined(settings.clientSessionMaxLifespan) ??
      settings.ssoSessionMaxLifespan ??
      0,
    offline_session_idle_timeout: settings.offlineSessionIdleTimeout ?? 0,
    offline_session_max_lifespan: settings.offlineSessionMaxLifespan ?? 0,
    offline_session_max_lifespan_enabled: settings.offlineSessionMaxLifespanEnabled ?? false,
    dpop_bound_access_tokens: requiresDpop(client),
  };
}

/** Whether the realm's API client requires DPoP (the organization's switch). */
export async function isDpopRequired(admin: KeycloakAdmin, realm: string): Promise<boolean> {
  return requiresDpop(await apiClientOf(admin, realm));
}

function requiresDpop(client: { attributes?: Record<string, unknown> }): boolean {
  return client.attributes?.[DPOP_ATTRIBUTE] === 'true';
}

/** Applies a validated partial update and returns the lifetimes now in effect. */
export async function setTokenLifetimes(
  admin: KeycloakAdmin,
  realm: string,
  patch: TokenLifetimesPatch,
): Promise<TokenLifetimes> {
  const settings = await realmSettingsOf(admin, realm);
  const realmUpdate: Record<string, number | boolean> = {};
  // Keycloak refuses a client session idle/max above the realm's SSO session idle/max
  // ("cannot exceed realm SSO session ..."), and would cap the session there anyway. Asking
  // for a longer client session therefore raises the realm's SSO limits to match; they only
  // bound browser sessions, which the API realms do not use.
  if (patch.client_session_idle_timeout !== undefined) {
    if (patch.client_session_idle_timeout > (settings.ssoSessionIdleTimeout ?? 0)) {
      realmUpdate.ssoSessionIdleTimeout = patch.client_session_idle_timeout;
    }
  }
  if (patch.client_session_max_lifespan !== undefined) {
    if (patch.client_session_max_lifespan > (settings.ssoSessionMaxLifespan ?? 0)) {
      realmUpdate.ssoSessionMaxLifespan = patch.client_session_max_lifespan;
    }
  }
  if (patch.offline_session_idle_timeout !== undefined)
    realmUpdate.offlineSessionIdleTimeout = patch.offline_session_idle_timeout;
  if (patch.offline_session_max_lifespan !== undefined)
    realmUpdate.offlineSessionMaxLifespan = patch.offline_session_max_lifespan;
  if (patch.offline_session_max_lifespan_enabled !== undefined)
    realmUpdate.offlineSessionMaxLifespanEnabled = patch.offline_session_max_lifespan_enabled;
  // The realm first: the client update below is only accepted within the new SSO limits.
  if (Object.keys(realmUpdate).length > 0) await admin.realms.update({ realm }, realmUpdate);

  const attributes: Record<string, string> = {};
  for (const [key, name] of Object.entries(CLIENT_ATTRIBUTES)) {
    const value = patch[key as keyof typeof CLIENT_ATTRIBUTES];
    if (value !== undefined) attributes[name] = String(value);
  }
  if (patch.dpop_bound_access_tokens !== undefined) {
    attributes[DPOP_ATTRIBUTE] = String(patch.dpop_bound_access_tokens);
  }
  if (Object.keys(attributes).length > 0) {
    const client = await apiClientOf(admin, realm);
    await admin.clients.update(
      { realm, id: client.id! },
      { ...client, attributes: { ...client.attributes, ...attributes } },
    );
  }
  return getTokenLifetimes(admin, realm);
}

async function realmSettingsOf(admin: KeycloakAdmin, realm: string) {
  // The client library answers Keycloak's 404 as nothing: the organization's realm is gone.
  const settings = await admin.realms.findOne({ realm });
  if (!settings) throw new AppError('organizationNotFound');
  return settings;
}

async function apiClientOf(admin: KeycloakAdmin, realm: string) {
  const clientId = apiClientIdOf(realm);
  const [client] = await admin.clients.find({ realm, clientId });
  if (!client?.id) throw new Error(`client ${clientId} not found in realm ${realm}`);
  return client;
}

function positiveOrUndefined(value: unknown): number | undefined {
  const number = Number(value);
  return Number.isInteger(number) && number > 0 ? number : undefined;
}
