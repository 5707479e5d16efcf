/**
 * Normalisers for column values whose JavaScript type depends on the driver: node-postgres and
 * PGlite disagree on whether timestamptz arrives as a Date or a string and whether jsonb is
 * already parsed. Repositories map rows through these so both backends yield identical output.
 */

/** Converts a timestamptz value to an ISO 8601 UTC string with milliseconds (`...sssZ`). */
export function toIsoTimestamp(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string') {
    // PostgreSQL's text form ("2026-01-02 03:04:05.123456+00") is not valid ISO 8601 for Date.
    const iso = value.replace(' ', 'T').replace(/(:\d{2}(?:\.\d+)?[+-]\d{2})$/, '$1:00');
    const parsed = new Date(iso);
    if (!Number.isNaN(parsed.getTime())) return parsed.toISOString();
  }
  throw new TypeError(`not a timestamp: ${String(value)}`);
}

/** Like {@link toIsoTimestamp} but keeps SQL NULL as `null`. */
export function toIsoTimestampOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : toIsoTimestamp(value);
}

/** Reads a jsonb column holding an array of strings, parsed or not. */
export function toStringArray(value: unknown): string[] {
  const parsed: unknown = typeof value === 'string' ? JSON.parse(value) : value;
  if (!Array.isArray(parsed)) throw new TypeError('jsonb value is not an array');
  return parsed.map((item) => String(item));
}

/** Serialises a value for a jsonb column; node-postgres would otherwise send arrays as SQL arrays. */
export function toJsonb(value: unknown): string {
  return JSON.stringify(value);
}
