import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { createRevocationList, type RevocationList } from '../../../src/auth/revocation.ts';
import { endAppA } from '../../helpers/principal.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.parse('2026-11-23T10:00:00.500Z');
let clock: TestClock;
const SECOND = 1000;
const iat = (ms: number) => Math.floor(ms / 1000);

function revocationList(): Promise<RevocationList> {
  return createRevocationList({
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });
}

describe('a realm-wide revocation and the revocation of one token', () => {
  beforeEach(() => {
    clock = manualClock(T0);
  });

  it("refuses every user's tokens and Basic logins of the realm from before it, for its lifetime", async () => {
    const list = await revocationList();
    await list.revoke({
      realm: 'acme',
      userId: '',
      sessionIds: [],
      ttlSeconds: 1,
      userTtlSeconds: 60,
      tokenTtlSeconds: 300,
      wholeRealm: true,
    });
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 5 * SECOND))).toBe(true);
    expect(list.isIssuedBeforeRevocation('acme', 'u2', iat(T0 - 5 * SECOND))).toBe(true);
    expect(list.userRevokedAt('acme', 'u2')).toBe(T0);
    // Another realm, and tokens issued after it, are untouched.
    expect(list.isIssuedBeforeRevocation('other', 'u1', iat(T0 - 5 * SECOND))).toBe(false);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 + 2 * SECOND))).toBe(false);
    // Past its lifetime it has nothing left to refuse.
    clock.advance(301 * SECOND);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 5 * SECOND))).toBe(false);
    expect(list.userRevokedAt('acme', 'u2')).toBeUndefined();
  });

  it('a later user revocation wins over an earlier realm-wide one, and the reverse', async () => {
    const list = await revocationList();
    const whole = { realm: 'acme', userId: '', sessionIds: [], ttlSeconds: 1, userTtlSeconds: 60 };
    await list.revoke({ ...whole, tokenTtlSeconds: 300, wholeRealm: true });
    clock.advance(10 * SECOND);
    await list.revoke({ ...whole, userId: 'u1', tokenTtlSeconds: 300 });
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0 + 10 * SECOND);
    expect(list.userRevokedAt('acme', 'u2')).toBe(T0);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 + 5 * SECOND))).toBe(true);
    expect(list.isIssuedBeforeRevocation('acme', 'u2', iat(T0 + 5 * SECOND))).toBe(false);
  });

  it("starts from the moment given (a realm's not-before), never from the future", async () => {
    const list = await revocationList();
    const whole = { realm: 'acme', userId: '', sessionIds: [], ttlSeconds: 1, userTtlSeconds: 60 };
    await list.revoke({ ...whole, tokenTtlSeconds: 300, wholeRealm: true, at: T0 - 60 * SECOND });
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 61 * SECOND))).toBe(true);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 30 * SECOND))).toBe(false);
    await list.revoke({ ...whole, tokenTtlSeconds: 300, wholeRealm: true, at: T0 + 3600 * SECOND });
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 30 * SECOND))).toBe(true);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 + 2 * SECOND))).toBe(false);
  });

  it('refuses one token by its id, and neither its session nor its user', async () => {
    const list = await revocationList();
    await list.revoke({
      realm: 'acme',
      userId: 'u1',
      sessionIds: [],
      tokenIds: ['jti-1'],
      ttlSeconds: 30,
      userTtlSeconds: 0,
    });
    expect(list.isTokenRevoked('acme', 'jti-1')).toBe(true);
    expect(list.isTokenRevoked('acme', 'jti-2')).toBe(false);
    expect(list.isSessionRevoked('acme', 'jti-1')).toBe(false);
    expect(list.userRevokedAt('acme', 'u1')).toBeUndefined();
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - SECOND))).toBe(false);
    clock.advance(31 * SECOND);
    expect(list.isTokenRevoked('acme', 'jti-1')).toBe(false);
  });

  it("refuses one client's part of a session, from before it: not the session's other clients, nor later tokens", async () => {
    const list = await revocationList();
    await endAppA(list);
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 - 5 * SECOND))).toBe(true);
    // The other clients of the session keep their tokens, as Keycloak keeps their sessions.
    expect(list.isClientSessionRevoked('acme', 's1', 'app-b', iat(T0 - 5 * SECOND))).toBe(false);
    expect(list.isClientSessionRevoked('acme', 's2', 'app-a', iat(T0 - 5 * SECOND))).toBe(false);
    // A login of the same client in the same session after it (a new client session).
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 + 2 * SECOND))).toBe(false);
    // Nothing else of the session or the user is refused.
    expect(list.isSessionRevoked('acme', 's1')).toBe(false);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', iat(T0 - 5 * SECOND))).toBe(false);
    expect(list.userRevokedAt('acme', 'u1')).toBeUndefined();
    // For as long as an access token of the realm can live, then forgotten.
    clock.advance(299 * SECOND);
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 - 5 * SECOND))).toBe(true);
    clock.advance(2 * SECOND);
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 - 5 * SECOND))).toBe(false);
  });

  it("keeps the later end of one client's part of a session when two arrive out of order", async () => {
    const list = await revocationList();
    clock.advance(10 * SECOND);
    await endAppA(list, T0 + 10 * SECOND);
    await endAppA(list, T0);
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 + 5 * SECOND))).toBe(true);
  });
  it("a token's or a client session's refusal concerns its own realm only: whoever signs chooses the ids", async () => {
    const list = await revocationList();
    await list.revoke({
      realm: 'acme',
      userId: 'u1',
      sessionIds: [],
      tokenIds: ['jti-1'],
      ttlSeconds: 30,
      userTtlSeconds: 0,
    });
    await endAppA(list);
    expect(list.isTokenRevoked('acme', 'jti-1')).toBe(true);
    expect(list.isTokenRevoked('other', 'jti-1')).toBe(false);
    expect(list.isClientSessionRevoked('acme', 's1', 'app-a', iat(T0 - 5 * SECOND))).toBe(true);
    expect(list.isClientSessionRevoked('other', 's1', 'app-a', iat(T0 - 5 * SECOND))).toBe(false);
  });
});
