import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/http/logger.ts';

/**
 * The process logger (createLogger: its redaction too) at `info`, writing into `lines`, one
 * entry a line as written, for the test to read.
 */
export function loggerToLines(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}
