import { z } from 'zod';
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
 * row), no lone surrogate (from a JSON `\ud800` escape: it has no UTF-8 form and would be
 * stored as U+FFFD), and none of the explicit directional embeddings, overrides and isolates
 * (U+202A-202E, U+2066-2069; the "Trojan Source" characters), which would show a name reversed
 * or reordered in lists, the CLI's tables and the audit log (a user `\u202Enimda` reads
 * "admin"). The marks (U+200E, U+200F, U+061C) stay: right-to-left text needs them, and they
 * reorder nothing around them. With the `u` flag a valid surrogate pair is one code point, so
 * it passes. Written as ranges, not `\p{...}`, because the API description carries the pattern
 * as it is.
 */
const ONE_LINE =
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  /^[^\u0000-\u001F\u007F-\u009F\uD800-\uDFFF\u202A-\u202E\u2066-\u2069]*$/u;
/** Like {@link ONE_LINE}, but tab, line feed and carriage return are allowed. */
const FREE_TEXT =
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  /^[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\uD800-\uDFFF\u202A-\u202E\u2066-\u2069]*$/u;

/** What {@link ONE_LINE} and {@link FREE_TEXT} refuse, as a refusal says it. */
const ONE_LINE_RULE = 'must not contain control characters or directional overrides';
const FREE_TEXT_RULE = `${ONE_LINE_RULE} (tab and line breaks allowed)`;

/** One line of printable text, as names and labels are shown in lists and logs. */
export const oneLine = (max: number, min = 1) =>
  z.string().min(min).max(max).regex(ONE_LINE, ONE_LINE_RULE);

/**
 * A count in a query string: digits only (no sign, no exponent, no spaces, no `0x`; never empty),
 * what JavaScript's `Number` would read otherwise (`''` as 0, `1e2` as 100).
 */
export const queryCount = (max: number) =>
  z
    .string()
    .regex(/^[0-9]{1,16}$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(0).max(max));

/** Several lines of text: tabs and line breaks allowed, other control characters not. */
export const freeText = (max: number) => z.string().max(max).regex(FREE_TEXT, FREE_TEXT_RULE);

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
      message: `username must be 1 to 255 characters and ${ONE_LINE_RULE}`,
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
      message: `password must be 1 to 1024 characters and ${ONE_LINE_RULE}`,
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
