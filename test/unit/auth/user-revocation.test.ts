import pino from 'pino';
import type { IncomingMessage } from 'node:http';
import { beforeEach, describe, expect, it } from 'vitest';
import { authenticateRequest, type AuthenticateDeps } from '../../../src/auth/authenticate.ts';
import type { Principal } from '../../../src/tenancy/principal.ts';
import { endAppA, testPrincipal } from '../../helpers/principal.ts';
import { createRevocationList, type RevocationList } from '../../../src/auth/revocation.ts';
import { manualClock, type TestClock } from '../../helpers/test-clock.ts';

const T0 = Date.parse('2026-11-23T10:00:00.500Z');
let clock: TestClock;

function principal(issuedAtMs: number, method: Principal['method'] = 'bearer'): Principal {
  return testPrincipal({
    method,
    issuedAt: Math.floor(issuedAtMs / 1000),
    expiresAt: Math.floor(issuedAtMs / 1000) + 3600,
  });
}

async function revocationList(): Promise<RevocationList> {
  return createRevocationList({
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });
}

/** User u1 of realm acme: its cached Basic logins dropped, for a minute. */
const USER_U1 = {
  realm: 'acme',
  userId: 'u1',
  sessionIds: [],
  ttlSeconds: 1,
  userTtlSeconds: 60,
};

function revokeUser(list: RevocationList, tokenTtlSeconds?: number) {
  return list.revoke({
    ...USER_U1,
    ...(tokenTtlSeconds === undefined ? {} : { tokenTtlSeconds }),
  });
}

/** What `authenticateRequest` needs: `revocations` and the given Basic and Bearer, no DPoP. */
function authDeps(
  revocations: RevocationList,
  given: Pick<AuthenticateDeps, 'basic' | 'bearer'>,
): AuthenticateDeps {
  return {
    ...given,
    dpop: { algs: 'ES256', prove: () => Promise.reject(new Error('no DPoP here')) },
    revocations,
    activeCheck: { ensureActive: () => undefined },
    clientAddressOf: () => '127.0.0.1',
    resourceMetadataOf: () => 'http://gw.example/.well-known/oauth-protected-resource/api/acme',
    dpopRequired: () => false,
    metrics: { authFailure: () => undefined },
  };
}

describe("a user's token revocation", () => {
  beforeEach(() => {
    clock = manualClock(T0);
  });

  it('refuses tokens issued before it, and in its second, for the given time only', async () => {
    const list = await revocationList();
    expect(list.isIssuedBeforeRevocation('acme', 'u1', principal(T0 - 5000).issuedAt)).toBe(false);
    await revokeUser(list, 3600);
    const check = (issuedAtMs: number) =>
      list.isIssuedBeforeRevocation('acme', 'u1', principal(issuedAtMs).issuedAt);
    expect(check(T0 - 5000)).toBe(true);
    // `iat` has whole seconds: a token of the same second cannot be told apart.
    expect(check(T0 + 400)).toBe(true);
    expect(check(T0 + 600)).toBe(false);
    expect(list.isIssuedBeforeRevocation('acme', 'u2', principal(T0 - 5000).issuedAt)).toBe(false);
    expect(list.isIssuedBeforeRevocation('other', 'u1', principal(T0 - 5000).issuedAt)).toBe(false);
    clock.advance(3600_000);
    expect(check(T0 - 5000)).toBe(false);
  });

  it("keeps a user's revocation whatever comes after it: a session's end, an older one heard late", async () => {
    const list = await revocationList();
    await revokeUser(list, 3600);
    // The end of one of the user's sessions, which concerns no cached Basic login.
    clock.advance(1000);
    await list.revoke({
      realm: 'acme',
      userId: 'u1',
      sessionIds: ['s1'],
      ttlSeconds: 300,
      userTtlSeconds: 0,
    });
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0);
    // A revocation made earlier on another replica, heard now (shared after an outage).
    await list.revoke({ ...USER_U1, at: T0 - 30_000, tokenTtlSeconds: 10 });
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', principal(T0 - 5000).issuedAt)).toBe(true);
    // Each for as long as it was given.
    clock.advance(58_000);
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', principal(T0 - 5000).issuedAt)).toBe(true);
    clock.advance(2000);
    expect(list.userRevokedAt('acme', 'u1')).toBeUndefined();
  });

  it('leaves tokens alone when only cached Basic logins are concerned', async () => {
    const list = await revocationList();
    await revokeUser(list);
    expect(list.userRevokedAt('acme', 'u1')).toBe(T0);
    expect(list.isIssuedBeforeRevocation('acme', 'u1', principal(T0 - 5000).issuedAt)).toBe(false);
  });

  it('is one check of the pipeline: Bearer is refused whether verified before or now, Basic is left to its cache', async () => {
    const revocations = await revocationList();
    const old = principal(T0 - 5000);
    // A token verified before is known at once; a new one is verified asynchronously.
    let verifiedBefore = true;
    const deps = authDeps(revocations, {
      basic: { authenticate: () => Promise.resolve(principal(T0 - 5000, 'basic')) },
      bearer: { verify: () => (verifiedBefore ? old : Promise.resolve(old)) },
    });
    const request = (authorization: string) => ({ headers: { authorization } }) as IncomingMessage;
    expect(authenticateRequest(request('Bearer abc'), 'acme', '/api/acme', deps)).toBe(old);
    await revokeUser(revocations, 3600);
    expect(() => authenticateRequest(request('Bearer abc'), 'acme', '/api/acme', deps)).toThrow(
      expect.objectContaining({ result: '401-00002' }),
    );
    verifiedBefore = false;
    await expect(
      authenticateRequest(request('Bearer abc'), 'acme', '/api/acme', deps),
    ).rejects.toMatchObject({
      result: '401-00002',
    });
    // A Basic principal comes from a login the authenticator vouches for (see basic/).
    const basic = await authenticateRequest(
      request(`Basic ${Buffer.from('alice:pw').toString('base64')}`),
      'acme',
      '/api/acme',
      deps,
    );
    expect(basic.method).toBe('basic');
  });

  it("refuses, on both Bearer paths, the tokens of the client whose part of the session ended, not the session's other clients", async () => {
    const revocations = await revocationList();
    const ofClient = (clientId: string) => ({ ...principal(T0 - 5000), clientId });
    // A token verified before is known at once; a new one is verified asynchronously.
    const depsFor = (token: Principal, verifiedBefore: boolean) =>
      authDeps(revocations, {
        basic: { authenticate: () => Promise.reject(new Error('no Basic here')) },
        bearer: { verify: () => (verifiedBefore ? token : Promise.resolve(token)) },
      });
    const request = { headers: { authorization: 'Bearer abc' } } as IncomingMessage;
    await endAppA(revocations);
    const ended = ofClient('app-a');
    expect(() => authenticateRequest(request, 'acme', '/api/acme', depsFor(ended, true))).toThrow(
      expect.objectContaining({ result: '401-00002' }),
    );
    await expect(
      authenticateRequest(request, 'acme', '/api/acme', depsFor(ended, false)),
    ).rejects.toMatchObject({ result: '401-00002' });
    const other = ofClient('app-b');
    expect(authenticateRequest(request, 'acme', '/api/acme', depsFor(other, true))).toBe(other);
    await expect(
      authenticateRequest(request, 'acme', '/api/acme', depsFor(other, false)),
    ).resolves.toBe(other);
  });
});
