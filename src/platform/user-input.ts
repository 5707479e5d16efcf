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

/** Tab, line feed and carriage return: the only control characters free text may hold. */
const LINE_BREAKS_AND_TABS = /[\t\n\r]/g;
/** Control characters, and lone surrogates (a valid pair is one code point, not `Cs`). */
const UNSTORABLE = /[\p{Cc}\p{Cs}]/u;

/**
 * Whether `value` can be stored and shown as one line: no control character at all (C0, DEL,
 * C1; NUL would make PostgreSQL refuse the row) and well-formed UTF-16 (a lone surrogate from
 * a JSON `\ud800` escape has no UTF-8 form and would be stored as U+FFFD).
 */
export function isOneLine(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/** Like `isOneLine`, but tabs and line breaks are allowed (descriptions, remarks). */
export function isFreeText(value: string): boolean {
  return isOneLine(value.replace(LINE_BREAKS_AND_TABS, ' '));
}

/** Refuses usernames we cannot store or show safely; Keycloak applies its own rules after. */
export function validateUsername(username: string): void {
  if (username.length < 1 || username.length > 255 || !isOneLine(username)) {
    throw new AppError('badRequestBody', {
      message: 'username must be 1 to 255 characters without control characters',
    });
  }
}

/**
 * Refuses empty passwords, ones long enough to make hashing a denial of service, and control
 * characters (no Basic header could carry them back).
 */
export function validatePassword(password: string): void {
  if (password.length < 1 || password.length > 1024 || !isOneLine(password)) {
    throw new AppError('badRequestBody', {
      message: 'password must be 1 to 1024 characters without control characters',
    });
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
