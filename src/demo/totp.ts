import { encodeBase32 } from '../cli/otp.ts';

/*
 * What the demo prints for its two-factor user. Own code rather than an OTP library: the gateway
 * never computes a one-time password (Keycloak checks them), so a production install
 * (`npm ci --omit=dev`) carries none; tests compute codes with otplib (test/helpers/totp.ts).
 */

/** The base32 form of a Keycloak OTP secret (kept as plain ASCII), as authenticator apps take it. */
export function base32OfOtpSecret(rawSecret: string): string {
  return encodeBase32(Buffer.from(rawSecret, 'ascii'));
}

/** An `otpauth://` URI (QR code content) for Keycloak's default policy: SHA-1, 6 digits, 30 s. */
export function otpauthUri(rawSecret: string, username: string, issuer: string): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(username)}`;
  const policy = 'period=30&digits=6&algorithm=SHA1';
  return `otpauth://totp/${label}?secret=${base32OfOtpSecret(rawSecret)}&${policy}&issuer=${encodeURIComponent(issuer)}`;
}
