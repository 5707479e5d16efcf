import {
  isOrganizationId,
  isWorkspaceId,
  MASTER_REALM,
  RESERVED_ORGANIZATION_IDS,
} from '../tenancy/identifiers.ts';
import { usageError } from './errors.ts';

const DURATION = /^(\d{1,10})([smhd]?)$/;
const UNIT_SECONDS = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 } as const;
// Keycloak keeps every lifetime as a 32-bit signed number of seconds.
const MAX_SECONDS = 2_147_483_647;

/**
 * Parses a lifetime: `<n>s`, `<n>m`, `<n>h`, `<n>d` or plain seconds, into seconds.
 * Zero is refused: Keycloak reads 0 as "inherit" or "no limit", never as "expire at once".
 */
export function parseDuration(text: string, option: string): number {
  const match = DURATION.exec(text);
  if (!match) {
    throw usageError(`${option}: expected a duration like 90s, 15m, 1h, 365d or plain seconds`);
  }
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2] as keyof typeof UNIT_SECONDS];
  if (seconds < 1) throw usageError(`${option}: the duration must be at least 1 second`);
  if (seconds > MAX_SECONDS) throw usageError(`${option}: the duration is too long`);
  return seconds;
}

/** Parses `true` or `false`, nothing else, so a typo cannot silently mean "off". */
export function parseFlag(text: string, option: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw usageError(`${option}: expected true or false`);
}

const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * Parses an ISO 8601 date (`2026-05-01`, midnight UTC) or date-time with a zone
 * (`2026-05-01T10:00+09:00`) and returns it in UTC (`toISOString`). A date-time without a zone
 * is refused rather than read in this machine's zone, which may not be the user's intent.
 */
export function parseTimestamp(text: string, option: string): string {
  const match = TIMESTAMP.exec(text);
  const time = match ? new Date(text) : undefined;
  if (!match || !time || Number.isNaN(time.getTime())) {
    throw usageError(
      `${option}: expected an ISO date or a date-time with zone, e.g. 2026-05-01T10:00Z`,
    );
  }
  const [, year, month, day, hour = '0', minute = '0', second = '0'] = match;
  // `Date` rolls 2026-02-30 over to March 2; a calendar mistake should be reported instead.
  const calendar = new Date(0);
  calendar.setUTCFullYear(Number(year), Number(month) - 1, Number(day));
  const validDate =
    calendar.getUTCFullYear() === Number(year) &&
    calendar.getUTCMonth() === Number(month) - 1 &&
    calendar.getUTCDate() === Number(day);
  if (!validDate || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) {
    throw usageError(`${option}: no such date or time`);
  }
  return time.toISOString();
}

/** The rules of the ids, as the usage errors say them (the gateway's own, identifiers.ts). */
const ORGANIZATION_RULE =
  'an organization id is a lowercase letter, then lowercase letters, digits, _ or -, ' +
  `at most 36 in all, and not ${RESERVED_ORGANIZATION_IDS.join(', ')}`;
const WORKSPACE_RULE =
  'a workspace id is a letter or digit, then letters, digits, _ or -, at most 36 in all';

/*
 * The refused word is never echoed, only the argument it was given as (`<org>`, `--realm`) and
 * its rule: a mistyped argument may be a password pasted in the wrong place, which must not
 * land in the terminal's scrollback or a CI log.
 */

/** Returns `id`, given as `argument`, if it can be an organization id; else a usage error. */
export function checkOrganization(id: string, argument: string): string {
  if (!isOrganizationId(id)) throw usageError(`invalid ${argument}: ${ORGANIZATION_RULE}`);
  return id;
}

/** Returns `id`, given as `argument`, if it can be a workspace id; else a usage error. */
export function checkWorkspace(id: string, argument: string): string {
  if (!isWorkspaceId(id)) throw usageError(`invalid ${argument}: ${WORKSPACE_RULE}`);
  return id;
}

/** Returns `realm`, given as `argument`, if it is `master` or can be an organization id. */
export function checkRealm(realm: string, argument: string): string {
  if (realm !== MASTER_REALM && !isOrganizationId(realm)) {
    throw usageError(`invalid ${argument}: master or an organization id (${ORGANIZATION_RULE})`);
  }
  return realm;
}
