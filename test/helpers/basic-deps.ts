import { pino } from 'pino';
import type { BearerVerifier } from '../../src/auth/bearer/bearer-verifier.ts';
import { createGoneRealms } from '../../src/auth/gone-realms.ts';
import type { RevocationList } from '../../src/auth/revocation.ts';

/**
 * What unit tests of the Basic authenticator leave as it is (createBasicAuthenticator's other
 * deps): logins cached a minute, none kept through an outage, Keycloak up, no account locked,
 * no revocation asked about, nothing logged.
 */
export function settledBasicDeps() {
  return {
    bearer: {} as BearerVerifier,
    cacheSecret: 'test-secret-of-16-chars',
    maxCacheSeconds: 60,
    maxOutageSeconds: 0,
    keycloakDown: () => false,
    slowGrantPauseMs: 1000,
    maxLocalEntries: 100,
    loginLockMs: 10_000,
    revocations: {} as RevocationList,
    locks: {
      blockOf: () => Promise.resolve({ twoFactor: false, lockedOut: false }),
      isLocked: () => false,
      firstRefusal: () => true,
      ended: () => {},
    },
    metrics: { cacheLookup: () => {} },
    gone: createGoneRealms(),
    logger: pino({ level: 'silent' }),
  };
}
