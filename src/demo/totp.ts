import { authenticator as defaultAuthenticator } from 'otplib';
import { KeyEncodings } from '@otplib/core';

/** Keycloak keeps the OTP secret as a plain ASCII string; apps get it base32-encoded. */
const authenticator = defaultAuthenticator.clone({ encoding: KeyEncodings.ASCII });

/** The base32 form of a Keycloak OTP secret, as authenticator apps take it. */
export function base32OfOtpSecret(rawSecret: string): string {
  return authenticator.encode(rawSecret);
}

/** An `otpauth://` URI for authenticator apps (QR code content). */
export function otpauthUri(rawSecret: string, username: string, issuer: string): string {
  return authenticator.keyuri(username, issuer, base32OfOtpSecret(rawSecret));
}

/** The current one-time password for a Keycloak OTP secret. */
export function currentTotp(rawSecret: string): string {
  return authenticator.generate(base32OfOtpSecret(rawSecret));
}
