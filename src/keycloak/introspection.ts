import type { KeycloakCalls } from './keycloak-calls.ts';
import { unexpectedAnswer } from './keycloak-failures.ts';
import { GATEWAY_CLIENT_ID } from './service-admin.ts';

/** Whether Keycloak still considers a token active (RFC 7662). */
export type Introspect = (realm: string, token: string) => Promise<boolean>;

/**
 * Token introspection as the gateway's confidential client, through the client layer (plain
 * `node:http`, keep-alive pool: background re-checks run at up to 50 a second per replica, on
 * the CPU that serves requests). Failures are AppErrors: 503 unreachable, 504 too slow, 502
 * anything but a 200 JSON `active` (a refused gateway client is the gateway's problem).
 */
export function createIntrospector(options: {
  calls: KeycloakCalls;
  clientSecret: string;
}): Introspect {
  const credentials = new URLSearchParams({
    client_id: GATEWAY_CLIENT_ID,
    client_secret: options.clientSecret,
  }).toString();
  return (realm, token) =>
    options.calls.exchange(
      'introspection',
      `/realms/${encodeURIComponent(realm)}/protocol/openid-connect/token/introspect`,
      `${credentials}&token=${encodeURIComponent(token)}`,
      activeOf,
    );
}

/** `active` of a 200 JSON answer; anything else is a bad answer. */
function activeOf(status: number, text: string): boolean {
  if (status !== 200) throw unexpectedAnswer('token introspection', status);
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw unexpectedAnswer('token introspection', status, 'not JSON');
  }
  const active = (answer as { active?: unknown } | null)?.active;
  if (typeof active !== 'boolean') {
    throw unexpectedAnswer('token introspection', status, 'no boolean "active"');
  }
  return active;
}
