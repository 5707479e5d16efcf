import { AppError } from '../envelope/errors.ts';

const BASE32 = /^[A-Z2-7]+$/;
/** RFC 4226 section 4 (R6): the shared secret MUST be at least 128 bits. */
const MIN_OTP_SECRET_BITS = 128;
const MAX_OTP_SECRET_CHARS = 256;

/** Whether `value` holds a C0 control character or DEL (line breaks included). */
export function hasControlCharacters(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code === 0x7f) return true;
  }
  return false;
}

/** Refuses usernames we cannot store or show safely; Keycloak applies its own rules after. */
export function validateUsername(username: string): void {
  if (username.length < 1 || username.length > 255 || hasControlCharacters(username)) {
    throw new AppError('badRequestBody', {
      message: 'username must be 1 to 255 characters without control characters',
    });
  }
}

/** Refuses empty passwords and ones long enough to make hashing a denial of service. */
export function validatePassword(password: string): void {
  if (password.length < 1 || password.length > 1024) {
    throw new AppError('badRequestBody', { message: 'password must be 1 to 1024 characters' });
  }
}

/**
 * Brings a base32 OTP secret as people copy it from an app ("jbsw y3dp ...", with or without
 * `=` padding) to the canonical form Keycloak decodes, or refuses it.
 */
export function normalizeBase32Secret(secret: string): string {
  const canonical = secret.replace(/[\s-]/g, '').replace(/=+$/, '').toUpperCase();
  if (
    !BASE32.test(canonical) ||
    canonical.length * 5 < MIN_OTP_SECRET_BITS ||
    canonical.length > MAX_OTP_SECRET_CHARS
  ) {
    throw new AppError('badRequestBody', {
      message: `otp_secret must be base32 (A-Z, 2-7) of at least ${MIN_OTP_SECRET_BITS} bits`,
    });
  }
  return canonical;
}
