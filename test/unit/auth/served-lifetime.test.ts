import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { createRevocationList, type RevocationList } from '../../../src/auth/revocation.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const SECOND = 1000;
const DAY = 86400;
let clock: TestClock;

function revocationList(): Promise<RevocationList> {
  return createRevocationList({
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });
}

/** A session ended while the realm's settings say its tokens live a minute. */
const endSession = { realm: 'acme', userId: 'u1', sessionIds: ['s1'], ttlSeconds: 60 };

describe('a refusal lasts as long as the longest-lived token of its realm still served', () => {
  beforeEach(() => {
    clock = manualClock(T0);
  });

  it("keeps a session's tokens refused past today's lifetime while a day-long token is served", async () => {
    const list = await revocationList();
    // A token issued under the former lifetime of a day, served until its `exp`.
    list.noteServedLifetime('acme', DAY, T0 + DAY * SECOND);
    await list.revoke({ ...endSession, userTtlSeconds: 0 });
    clock.advance(61 * SECOND);
    expect(list.isSessionRevoked('acme', 's1')).toBe(true);
    clock.advance((DAY - 62) * SECOND);
    expect(list.isSessionRevoked('acme', 's1')).toBe(true);
    clock.advance(2 * SECOND);
    expect(list.isSessionRevoked('acme', 's1')).toBe(false);
  });

  it("a user's tokens and a realm's too; another realm's tokens, or ones expired, lengthen nothing", async () => {
    const list = await revocationList();
    list.noteServedLifetime('acme', DAY, T0 + DAY * SECOND);
    list.noteServedLifetime('other', 2 * DAY, T0 + 2 * DAY * SECOND);
    list.noteServedLifetime('old', DAY, T0 + 10 * SECOND);
    clock.advance(20 * SECOND);
    const iat = Math.floor(T0 / 1000);
    const user = { userId: 'u1', sessionIds: [], ttlSeconds: 1, userTtlSeconds: 60 };
    await list.revoke({ ...user, realm: 'acme', tokenTtlSeconds: 60 });
    await list.revoke({ ...user, realm: 'old', tokenTtlSeconds: 60 });
    await list.revoke({ ...user, realm: 'whole', tokenTtlSeconds: 60, wholeRealm: true });
    clock.advance(120 * SECOND);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat)).toBe(true);
    expect(list.isIssuedBeforeRevocation('old', 'u1', iat)).toBe(false);
    expect(list.isIssuedBeforeRevocation('whole', 'u9', iat)).toBe(false);
  });

  it('a shorter lifetime noted later does not shorten the longest one still served', async () => {
    const list = await revocationList();
    list.noteServedLifetime('acme', DAY, T0 + DAY * SECOND);
    list.noteServedLifetime('acme', 300, T0 + 300 * SECOND);
    await list.revoke({ ...endSession, userTtlSeconds: 0 });
    clock.advance(3600 * SECOND);
    expect(list.isSessionRevoked('acme', 's1')).toBe(true);
  });
});
