import { randomBytes } from 'node:crypto';

/** A fresh TOTP secret and the URI authenticator apps take it from (QR code content). */
export interface OtpEnrollment {
  /** Base32 (A-Z2-7, no padding), as the API's `otp_secret` takes it and apps show it. */
  secret: string;
  uri: string;
}

const ISSUER = 'realmgate';
// RFC 4226 recommends 160 bits, the length of an HMAC-SHA1 key.
const SECRET_BYTES = 20;
const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** Generates a 160-bit TOTP secret for `username`; Keycloak's default policy (SHA-1, 6, 30 s). */
export function createOtpEnrollment(username: string): OtpEnrollment {
  const secret = encodeBase32(randomBytes(SECRET_BYTES));
  const label = `${encodeURIComponent(ISSUER)}:${encodeURIComponent(username)}`;
  return { secret, uri: `otpauth://totp/${label}?secret=${secret}&issuer=${ISSUER}` };
}

/** RFC 4648 base32 without padding. */
export function encodeBase32(bytes: Uint8Array): string {
  let text = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = ((buffer << 8) | byte) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      text += BASE32_ALPHABET[(buffer >> bits) & 31];
    }
  }
  if (bits > 0) text += BASE32_ALPHABET[(buffer << (5 - bits)) & 31];
  return text;
}
