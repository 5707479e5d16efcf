import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  createRevocationList,
  revokeUsers,
  type RevocationList,
} from '../../../src/auth/revocation.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.parse('2026-11-23T10:00:00.500Z');
let clock: TestClock;
let list: RevocationList;

beforeEach(async () => {
  clock = manualClock(T0);
  list = await createRevocationList({
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });
});

const issuedBefore = Math.floor(T0 / 1000) - 1;

// The one writing of a per-user refusal (platform/token-refusal.ts, auth-proxy/access-revocations.ts,
// the password set through the API, the credential changes Keycloak announces).
describe('revokeUsers', () => {
  it("drops a user's cached Basic logins for at least a second, and alone leaves the tokens", async () => {
    await revokeUsers(list, 'acme', { userId: 'u1' }, { basicSeconds: 0 });
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', issuedBefore)).toBe(false);
    expect(list.userRevokedAt('acme', 'u2')).toBeUndefined();
    clock.advance(1000);
    expect(list.userRevokedAt('acme', 'u1')).toBeUndefined();
  });

  it("with a token lifetime, refuses the user's tokens issued before it that long", async () => {
    await revokeUsers(list, 'acme', { userId: 'u1' }, { basicSeconds: 60, tokenTtlSeconds: 300 });
    expect(list.isIssuedBeforeRevocation('acme', 'u1', issuedBefore)).toBe(true);
    expect(list.isIssuedBeforeRevocation('acme', 'u2', issuedBefore)).toBe(false);
    expect(list.isSessionRevoked('acme', '')).toBe(false);
    clock.advance(300_000);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', issuedBefore)).toBe(false);
  });

  it('refuses each of several users as it would one alone, from the moment given', async () => {
    const at = T0 - 5000;
    await revokeUsers(
      list,
      'acme',
      { userIds: ['u1', 'u2'], at },
      { basicSeconds: 60, tokenTtlSeconds: 300 },
    );
    for (const user of ['u1', 'u2']) {
      expect(list.userRevokedAt('acme', user)).toBe(at);
      expect(list.isIssuedBeforeRevocation('acme', user, Math.floor(at / 1000) - 1)).toBe(true);
      expect(list.isIssuedBeforeRevocation('acme', user, Math.floor(T0 / 1000))).toBe(false);
    }
    expect(list.userRevokedAt('acme', '')).toBeUndefined();
  });
});
