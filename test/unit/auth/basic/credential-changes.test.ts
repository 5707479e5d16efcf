import { describe, expect, it } from 'vitest';
import {
  credentialChangesOf,
  endBasicLoginsOnCredentialChanges,
  refusalEndingsOf,
  type KeycloakEventsOfRealm,
} from '../../../../src/auth/basic/credential-changes.ts';
import type { RevocationList } from '../../../../src/auth/revocation.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

/**
 * Which of Keycloak's events end a user's cached Basic logins, with the event types and paths
 * Keycloak 26 gives (test/integration/basic-credential-changes.test.ts shows the real ones).
 */
describe('credential changes seen in Keycloak events', () => {
  const admin = (operationType: string, resourcePath: string, time = 1000, error?: string) => ({
    time,
    operationType,
    resourcePath,
    ...(error && { error }),
  });
  const user = (type: string, userId: string, time = 1000, error?: string) => ({
    time,
    type,
    userId,
    ...(error && { error }),
  });

  it.each([
    ['a password reset', admin('ACTION', 'users/u1/reset-password')],
    ['a user updated (a required action, disabled)', admin('UPDATE', 'users/u1')],
    ['a user deleted', admin('DELETE', 'users/u1')],
    ['a credential removed', admin('DELETE', 'users/u1/credentials/c1')],
    ['a role mapping added', admin('CREATE', 'users/u1/role-mappings/realm')],
    ['sessions ended', admin('ACTION', 'users/u1/logout')],
  ])('ends the logins after %s by an administrator', (_name, event) => {
    expect(credentialChangesOf({ user: [], admin: [event] })).toEqual(new Map([['u1', 1000]]));
  });

  it.each([
    'UPDATE_PASSWORD',
    'UPDATE_CREDENTIAL',
    'REMOVE_CREDENTIAL',
    'UPDATE_TOTP',
    'REMOVE_TOTP',
    'RESET_PASSWORD',
    'DELETE_ACCOUNT',
    'USER_DISABLED_BY_PERMANENT_LOCKOUT',
  ])('ends the logins after the user event %s', (type) => {
    expect(credentialChangesOf({ user: [user(type, 'u1')], admin: [] })).toEqual(
      new Map([['u1', 1000]]),
    );
  });

  it('leaves users alone for sign-ins, temporary lockouts, failures, new users and others', () => {
    const events: KeycloakEventsOfRealm = {
      user: [
        user('LOGIN', 'u1'),
        user('USER_DISABLED_BY_TEMPORARY_LOCKOUT', 'u1'),
        user('UPDATE_PASSWORD', 'u1', 1000, 'invalid_password'),
        user('UPDATE_PROFILE', 'u1'),
      ],
      admin: [
        admin('CREATE', 'users/u1'),
        admin('ACTION', 'users/u1/reset-password', 1000, 'password policy'),
        admin('UPDATE', 'clients/c1'),
        admin('ACTION', 'usersx/u1/reset-password'),
        { time: 1000, operationType: 'UPDATE' },
      ],
    };
    expect(credentialChangesOf(events)).toEqual(new Map());
  });

  it('names each user once, at the latest change', () => {
    const changes = credentialChangesOf({
      user: [user('UPDATE_PASSWORD', 'u1', 3000), user('UPDATE_TOTP', 'u2', 2000)],
      admin: [admin('ACTION', 'users/u1/reset-password', 4000), admin('UPDATE', 'users/u1', 1000)],
    });
    expect(changes).toEqual(
      new Map([
        ['u1', 4000],
        ['u2', 2000],
      ]),
    );
  });

  it.each([
    ['a password reset', admin('ACTION', 'users/u1/reset-password')],
    ['a user updated (enabled, a required action off)', admin('UPDATE', 'users/u1')],
    ['a credential removed', admin('DELETE', 'users/u1/credentials/c1')],
    ['"Reset OTP"', admin('ACTION', 'users/u1/disable-credential-types')],
    ['an unlock', admin('DELETE', 'attack-detection/brute-force/users/u1')],
  ])('lets refused logins be asked again after %s by an administrator', (_name, event) => {
    expect(refusalEndingsOf({ user: [], admin: [event] })).toEqual(new Set(['u1']));
  });

  it.each([
    'UPDATE_PASSWORD',
    'RESET_PASSWORD',
    'UPDATE_CREDENTIAL',
    'REMOVE_CREDENTIAL',
    'REMOVE_TOTP',
  ])('lets refused logins be asked again after the user event %s', (type) => {
    expect(refusalEndingsOf({ user: [user(type, 'u1')], admin: [] })).toEqual(new Set(['u1']));
  });

  it('keeps refusals after changes that let nobody in (no user-name lookup for them)', () => {
    const events: KeycloakEventsOfRealm = {
      user: [
        user('UPDATE_TOTP', 'u1'),
        user('DELETE_ACCOUNT', 'u1'),
        user('USER_DISABLED_BY_PERMANENT_LOCKOUT', 'u1'),
        user('UPDATE_PASSWORD', 'u1', 1000, 'invalid_password'),
      ],
      admin: [
        admin('CREATE', 'users/u1'),
        admin('DELETE', 'users/u1'),
        admin('CREATE', 'users/u1/role-mappings/realm'),
        admin('ACTION', 'users/u1/logout'),
        admin('ACTION', 'users/u1/reset-password', 1000, 'password policy'),
        admin('DELETE', 'attack-detection/brute-force/users'),
      ],
    };
    expect(refusalEndingsOf(events)).toEqual(new Set());
  });

  it("revokes the users' Basic logins from the change on, and nothing of their sessions", async () => {
    const revoked: Parameters<RevocationList['revoke']>[0][] = [];
    const passwordsSet: string[] = [];
    const seen = endBasicLoginsOnCredentialChanges({
      revocations: { revoke: (r) => Promise.resolve(void revoked.push(r)) },
      basicLoginSeconds: 3600,
      failureWindowSeconds: 300,
      passwordSet: (realm, userId) => Promise.resolve(void passwordsSet.push(`${realm}/${userId}`)),
      clock: manualClock(10_000),
    });
    await seen('org-a', {
      user: [],
      admin: [
        admin('ACTION', 'users/u1/reset-password', 5000),
        admin('CREATE', 'users/u2/role-mappings/realm', 5000),
      ],
    });
    const revocation = { realm: 'org-a', at: 5000, sessionIds: [], ttlSeconds: 1 };
    expect(revoked).toEqual([
      { ...revocation, userId: 'u1', userTtlSeconds: 3600 },
      { ...revocation, userId: 'u2', userTtlSeconds: 3600 },
    ]);
    // Its remembered wrong passwords go too: the new password may be one of them.
    expect(passwordsSet).toEqual(['org-a/u1']);
  });

  it('passes over a change told too late to matter (a first pull, one after a long stop)', async () => {
    const revoked: string[] = [];
    const passwordsSet: string[] = [];
    const now = Date.UTC(2026, 10, 29, 12);
    const seen = endBasicLoginsOnCredentialChanges({
      revocations: { revoke: (r) => Promise.resolve(void revoked.push(r.userId)) },
      basicLoginSeconds: 3600,
      failureWindowSeconds: 300,
      passwordSet: (_realm, userId) => Promise.resolve(void passwordsSet.push(userId)),
      clock: manualClock(now),
    });
    const minutesAgo = (minutes: number) => now - minutes * 60_000;
    await seen('org-a', {
      user: [],
      admin: [
        // Days ago: no login cached then is still served, no failure remembered came before it.
        admin('ACTION', 'users/u1/reset-password', minutesAgo(3 * 24 * 60)),
        // Half an hour ago: a login cached before it may still be served (BASIC_OUTAGE_MAX),
        // but every failure remembered now came after it.
        admin('ACTION', 'users/u2/reset-password', minutesAgo(30)),
        // Within the window: both.
        admin('ACTION', 'users/u3/reset-password', minutesAgo(4)),
      ],
    });
    expect(revoked).toEqual(['u2', 'u3']);
    expect(passwordsSet).toEqual(['u3']);
  });
});
