import { AppError } from '../envelope/errors.ts';

/** RFC 4226 section 4 (R6): the shared secret MUST be at least 128 bits. */
const MIN_OTP_SECRET_BITS = 128;
const MAX_OTP_SECRET_CHARS = 256;
/**
 * A base32 OTP secret as people copy it from an app: letters in either case and 2-7, spaces and
 * dashes anywhere, `=` padding at the end; 26 to 256 base32 characters (at least 128 bits).
 */
export const OTP_SECRET = new RegExp(
  `^(?:[\\s-]*[A-Za-z2-7]){${Math.ceil(MIN_OTP_SECRET_BITS / 5)},${MAX_OTP_SECRET_CHARS}}[\\s=-]*$`,
);
/** The message of a refused OTP secret, here and in the request schemas. */
export const OTP_SECRET_RULE = `must be base32 (A-Z, 2-7) of at least ${MIN_OTP_SECRET_BITS} bits`;

/**
 * One line: no control character (C0, DEL, C1: `\p{Cc}`; NUL would make PostgreSQL refuse the
 * row) and no lone surrogate (from a JSON `\ud800` escape: it has no UTF-8 form and would be
 * stored as U+FFFD). With the `u` flag a valid surrogate pair is one code point, so it passes.
 * Written as ranges, not `\p{...}`, because the API description carries the pattern as it is.
 */
// eslint-disable-next-line no-control-regex -- refusing control characters is the point
export const ONE_LINE = /^[^\u0000-\u001F\u007F-\u009F\uD800-\uDFFF]*$/u;
/** Like {@link ONE_LINE}, but tab, line feed and carriage return are allowed. */
// eslint-disable-next-line no-control-regex -- refusing control characters is the point
export const FREE_TEXT = /^[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\uD800-\uDFFF]*$/u;

/** Whether `value` can be stored and shown as one line (see {@link ONE_LINE}). */
export function isOneLine(value: string): boolean {
  return ONE_LINE.test(value);
}

/** Like `isOneLine`, but tabs and line breaks are allowed (descriptions, remarks). */
export function isFreeText(value: string): boolean {
  return FREE_TEXT.test(value);
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
  if (!OTP_SECRET.test(secret)) {
    throw new AppError('badRequestBody', { message: `otp_secret ${OTP_SECRET_RULE}` });
  }
  return secret.replace(/[\s=-]/g, '').toUpperCase();
}
