import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { createRevocationList, type RoleHolder } from '../../../src/auth/revocation.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const SECOND = 1000;
const iat = Math.floor(T0 / 1000);
let clock: TestClock;

const holder = (over: Partial<RoleHolder> = {}): RoleHolder => ({
  realm: 'acme',
  realmRoles: ['reader'],
  clientRoles: { 'acme-workspaces': ['ws'] },
  issuedAt: iat - 10,
  ...over,
});

/** Client role `ws` of `acme-workspaces`, deleted at T0, while tokens live 300 s. */
const deleted = {
  realm: 'acme',
  userId: '',
  sessionIds: [],
  ttlSeconds: 1,
  userTtlSeconds: 60,
  tokenTtlSeconds: 300,
  endedRoles: [{ client: 'acme-workspaces', name: 'ws' }],
};

describe('a deleted role refuses the tokens that carry it', () => {
  beforeEach(() => {
    clock = manualClock(T0);
  });

  it('refuses a token issued before that carries it, and no other', async () => {
    const list = await createRevocationList({
      keyPrefix: 'unit:',
      metrics: { revocationApplied: () => undefined },
      logger: pino({ level: 'silent' }),
      clock,
    });
    expect(list.carriesEndedRole(holder())).toBe(false);
    await list.revoke(deleted);
    expect(list.carriesEndedRole(holder())).toBe(true);
    // Issued in a later second, without it, the same name as a realm role, another realm.
    expect(list.carriesEndedRole(holder({ issuedAt: iat + 1 }))).toBe(false);
    expect(list.carriesEndedRole(holder({ clientRoles: { 'acme-workspaces': ['other'] } }))).toBe(
      false,
    );
    expect(list.carriesEndedRole(holder({ realmRoles: ['ws'], clientRoles: {} }))).toBe(false);
    expect(list.carriesEndedRole(holder({ realm: 'other' }))).toBe(false);
    // Past the longest a token issued before can live, nothing is kept.
    clock.advance(301 * SECOND);
    expect(list.carriesEndedRole(holder())).toBe(false);
  });

  it('a realm role by name; kept as long as a longer-lived token of the realm is served', async () => {
    const list = await createRevocationList({
      keyPrefix: 'unit:',
      metrics: { revocationApplied: () => undefined },
      logger: pino({ level: 'silent' }),
      clock,
    });
    list.noteServedLifetime('acme', 86400, T0 + 86400 * SECOND);
    await list.revoke({ ...deleted, endedRoles: [{ name: 'reader' }] });
    clock.advance(3600 * SECOND);
    expect(list.carriesEndedRole(holder())).toBe(true);
    expect(list.carriesEndedRole(holder({ realmRoles: [] }))).toBe(false);
  });
});
