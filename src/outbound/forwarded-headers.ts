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
