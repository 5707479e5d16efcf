import { pino, type DestinationStream, type Logger } from 'pino';

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

/** Creates the process logger (stdout unless `destination`); every other logger is its child. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'realmgate' },
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}
