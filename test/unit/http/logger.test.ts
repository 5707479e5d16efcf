import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { REDACTED_PATHS } from '../../../src/http/logger.ts';

describe('log redaction', () => {
  it('blanks credentials wherever they appear in a logged object', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = pino({ redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, sink);
    logger.info(
      {
        req: {
          headers: { authorization: 'Basic dXNlcjpzM2NyZXQ=', cookie: 'KEYCLOAK_SESSION=abc' },
        },
        login: { password: 's3cret-pw', username: 'alice' },
        grant: {
          refresh_token: 'eyJ.refresh',
          access_token: 'eyJ.access',
          client_secret: 'cs-123',
        },
      },
      'hello',
    );
    const line = lines.join('');
    for (const secret of [
      'dXNlcjpzM2NyZXQ=',
      'KEYCLOAK_SESSION=abc',
      's3cret-pw',
      'eyJ.refresh',
      'eyJ.access',
      'cs-123',
    ]) {
      expect(line).not.toContain(secret);
    }
    expect(JSON.parse(line)).toMatchObject({
      login: { username: 'alice', password: '[redacted]' },
    });
  });
});
