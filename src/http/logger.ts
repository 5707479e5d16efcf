import { pino, type DestinationStream, type Logger } from 'pino';

const CENSOR = '[redacted]';

/**
 * Words that make a field's name a secret's wherever they end it: passwords, secrets, every
 * token (access, refresh, id, logout...), client assertions, API keys, PKCE's `code_verifier`.
 */
const SECRET_ENDINGS = [
  'password',
  'passwd',
  'secret',
  'token',
  'assertion',
  'api[-_]?key',
  'code[-_]?verifier',
];

/**
 * Names that are secrets only as a whole: `Authorization`, cookies, DPoP proofs, Keycloak's
 * `credentials` (a user's password sits in its `value`; an audit line's `credential`, the kind
 * of credential a caller used, is no secret), the one-time passwords and recovery codes of its
 * login forms and password grant (`otp`, `totp`, `recoveryCodeInput`), a device grant's
 * `device_code`. Not `code`, an authorization code: every error's `code` (`ECONNREFUSED`, an
 * AppError's) is read by that name, and a code is good once, only with its client's secret or
 * verifier, which are redacted.
 */
const SECRET_NAMES = [
  '(?:proxy-)?authorization',
  '(?:set-)?cookie',
  'dpop',
  'credentials',
  't?otp',
  'recovery[-_]?code(?:s|[-_]?input)?',
  'device[-_]?code',
];

/** The names of fields whose values never reach the log, at any depth, in any case. */
const SECRET_NAME = new RegExp(
  `^(?:.*(?:${SECRET_ENDINGS.join('|')})|${SECRET_NAMES.join('|')})$`,
  'i',
);

/**
 * A cheap first look at a whole line: a line in which no secret's name occurs (most lines: the
 * access log's refusals, lifecycle messages) is written as it is, unparsed. The same words
 * anywhere in the line, so it matches wherever SECRET_NAME could.
 */
const MAY_NAME_SECRET = new RegExp([...SECRET_ENDINGS, ...SECRET_NAMES].join('|'), 'i');

/** Replaces, in place, the value of every field named as a secret, however deep. */
function censor(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) censor(item);
    return;
  }
  const fields = value as Record<string, unknown>;
  for (const name of Object.keys(fields)) {
    if (SECRET_NAME.test(name)) fields[name] = CENSOR;
    else censor(fields[name]);
  }
}

/**
 * Blanks out credentials in one finished log line, at any depth: an error's fields, a Keycloak
 * answer inside it, headers inside a logged object. pino's own `redact` paths reach a fixed
 * depth only; this sees the line after every serializer and child binding. Request bodies are
 * never logged; this catches any object that happens to carry a credential.
 */
export function redactLine(line: string): string {
  if (!MAY_NAME_SECRET.test(line)) return line;
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    // pino writes JSON lines only; anything else is not ours to read, and not written.
    return `{"msg":"unreadable log line dropped"}\n`;
  }
  censor(parsed);
  return `${JSON.stringify(parsed)}\n`;
}

/** Creates the process logger (stdout unless `destination`); every other logger is its child. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'realmgate' },
    hooks: { streamWrite: redactLine },
  };
  return destination ? pino(options, destination) : pino(options);
}
