import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, refusedForGood } from '../../../src/db/database-failures.ts';

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

describe('refusedForGood', () => {
  it('names the data errors a statement meets again however often it is sent', () => {
    for (const code of ['54000', '22003', '22021', '23505', '23502']) {
      expect(refusedForGood(withCode(code)), code).toBe(code);
    }
    expect(refusedForGood(new Error('batch failed', { cause: withCode('54000') }))).toBe('54000');
  });

  it('leaves what passes to be tried again: outages, conflicts, a server short of resources', () => {
    for (const err of [
      withCode('08006'),
      withCode('57P01'),
      withCode('57014'),
      withCode('40001'),
      withCode('40P01'),
      withCode('53100'),
      withCode('53300'),
      withCode('42P01'),
      withCode('ECONNRESET'),
      new Error('Connection terminated unexpectedly'),
      undefined,
    ]) {
      expect(refusedForGood(err), String(err)).toBeUndefined();
    }
  });
});
