import { KeyEncodings } from '@otplib/core';
import { authenticator as defaultAuthenticator } from 'otplib';

/** Keycloak keeps the OTP secret as a plain ASCII string; otplib reads it that way with this. */
export const keycloakAuthenticator = defaultAuthenticator.clone({ encoding: KeyEncodings.ASCII });

/** The current one-time password for a Keycloak OTP secret, as an authenticator app shows it. */
export function currentTotp(rawSecret: string): string {
  return keycloakAuthenticator.generate(keycloakAuthenticator.encode(rawSecret));
}
