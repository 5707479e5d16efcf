import type { Forwarded } from '../edge/forwarding.ts';

/*
 * The `X-Forwarded-*` headers the gateway sends, as `[name, value, ...]`: one way for the
 * automation service, another for Keycloak. Both are claims only the gateway may make: the
 * client's copies never pass (upstream-headers.ts).
 */

/**
 * `X-Forwarded-For`, `-Proto` and `-Host` as the edge vouches for them (edge/forwarding.ts):
 * what the automation service is told about the client.
 */
export function clientForwardedHeaders(forwarded: Forwarded): string[] {
  return [
    'x-forwarded-for',
    forwarded.for,
    'x-forwarded-proto',
    forwarded.proto,
    'x-forwarded-host',
    forwarded.host,
  ];
}

/**
 * `X-Forwarded-Host`, `-Proto` and `-Port` naming the gateway's public address (the origin of
 * `publicUrl`), never a caller's: what Keycloak (`--proxy-headers`) is told on `/auth` and on
 * the gateway's own grants, so that the issuer it writes and the URL it checks a DPoP proof's
 * `htu` against are `PUBLIC_URL/auth/...`.
 */
export function publicAddressHeaders(publicUrl: string): string[] {
  const url = new URL(publicUrl);
  return [
    'x-forwarded-host',
    url.host,
    'x-forwarded-proto',
    url.protocol.replace(':', ''),
    'x-forwarded-port',
    url.port || (url.protocol === 'https:' ? '443' : '80'),
  ];
}

/**
 * `X-Forwarded-For` toward Keycloak: the one client address the edge vouches for
 * (`Forwarding.clientAddress`), never a chain. Keycloak (`--proxy-headers=xforwarded`) takes the
 * first address of the header as the client's, for its sessions, its events (the audit log's
 * Keycloak records) and its realms' "HTTPS required" rule; behind a trusted proxy the first of
 * the chain is whatever the client wrote before the proxy appended the address it saw.
 */
export function keycloakClientHeaders(clientAddress: string): string[] {
  return ['x-forwarded-for', clientAddress];
}
