import type { RevocationList } from '../../src/auth/revocation.ts';
import type { Principal } from '../../src/tenancy/principal.ts';

/** A caller of realm `acme` with session `s1`, for unit tests; `overrides` set what a test varies. */
export function testPrincipal(
  overrides: Partial<Principal> & Pick<Principal, 'issuedAt' | 'expiresAt'>,
): Principal {
  return {
    realm: 'acme',
    userId: 'u1',
    username: 'alice',
    realmRoles: [],
    clientRoles: {},
    locale: undefined,
    method: 'bearer',
    sessionId: 's1',
    ...overrides,
  };
}

/**
 * Ends app-a's part of the test principal's session s1 in `list`, as an RFC 7009 revocation of
 * its refresh token does; `at`: when (the list's clock by default).
 */
export function endAppA(list: RevocationList, at?: number): Promise<void> {
  return list.revoke({
    realm: 'acme',
    userId: 'u1',
    sessionIds: [],
    clientSessions: [{ sessionId: 's1', clientId: 'app-a' }],
    ttlSeconds: 300,
    userTtlSeconds: 0,
    at,
  });
}
