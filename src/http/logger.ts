import { pino, type Logger } from 'pino';

/**
 * Paths pino blanks out before a line is written. Request bodies are never logged; these catch
 * headers and any object that happens to carry a credential.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["proxy-authorization"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.secret',
  '*.clientSecret',
  '*.client_secret',
  '*.access_token',
  '*.refresh_token',
  '*.id_token',
  '*.token',
];

/** Creates the process logger; every other logger is a child of it. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'realmgate' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  });
}
