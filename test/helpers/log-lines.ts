import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/http/logger.ts';

/**
 * The process logger (createLogger: its redaction too) at `info`, writing into `lines`, one
 * entry a line as written, for the test to read.
 */
export function loggerToLines(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  return { logger: loggerInto((chunk) => lines.push(chunk)), lines };
}

/** As loggerToLines, each line read as JSON: for tests that look for a line's fields. */
export function loggerToRecords(): { logger: Logger; records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const logger = loggerInto((chunk) => {
    for (const text of chunk.split('\n').filter(Boolean)) {
      records.push(JSON.parse(text) as Record<string, unknown>);
    }
  });
  return { logger, records };
}

function loggerInto(take: (chunk: string) => void): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      take(chunk.toString());
      done();
    },
  });
  return createLogger('info', sink);
}
