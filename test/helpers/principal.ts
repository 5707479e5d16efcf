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
