import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../../src/db/database-failures.ts';

function withCode(code: string, message = 'failed'): Error {
  return Object.assign(new Error(message), { code });
}

describe('isDatabaseUnavailable', () => {
  it('recognizes connection failures, the pool timeout and a server that is not available', () => {
    for (const err of [
      withCode('ECONNREFUSED'),
      withCode('ECONNRESET'),
      withCode('08006'),
      withCode('57P01'),
      withCode('57P03'),
      Object.assign(new Error('Knex: Timeout acquiring a connection.'), {
        name: 'KnexTimeoutError',
      }),
      new Error('Connection terminated unexpectedly'),
      // pg's connect timeout (DATABASE_CONNECT_TIMEOUT_MS), the statement timeout's cancel.
      new Error('timeout expired'),
      withCode('57014', 'canceling statement due to statement timeout'),
      new Error('query failed', { cause: withCode('ECONNREFUSED') }),
    ]) {
      expect(isDatabaseUnavailable(err), String(err)).toBe(true);
    }
  });

  it('leaves query errors and anything else to the generic 500', () => {
    const others: Record<string, unknown> = {
      'unique violation': withCode('23505', 'duplicate key'),
      'undefined table': withCode('42P01', 'relation does not exist'),
      'plain error': new Error('boom'),
      'a string': 'ECONNREFUSED',
      undefined: undefined,
      'an object that is no error': { code: 'ECONNREFUSED' },
    };
    for (const [name, err] of Object.entries(others)) {
      expect(isDatabaseUnavailable(err), name).toBe(false);
    }
  });
});
