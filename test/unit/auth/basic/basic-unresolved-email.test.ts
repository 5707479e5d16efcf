import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createBasicAuthenticator } from '../../../../src/auth/basic/basic-authenticator.ts';
import { isBootstrapAdmin } from '../../../../src/auth/bootstrap-admin.ts';
import { createFailedLoginMemory } from '../../../../src/auth/failed-logins.ts';
import { createGoneRealms } from '../../../../src/auth/gone-realms.ts';
import type { BearerVerifier } from '../../../../src/auth/bearer/bearer-verifier.ts';
import type { RevocationList } from '../../../../src/auth/revocation.ts';
import type { TokenClient } from '../../../../src/keycloak/token-client.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { AppError } from '../../../../src/envelope/errors.ts';

/**
 * A Basic login by e-mail whose account Keycloak's admin API cannot tell (it is down, or failed
 * a moment ago): in master it may name the bootstrap administrator, who never logs in by Basic
 * and whose failed grants would count towards Keycloak's lockout of the break-glass account. As
 * on `/auth` (bootstrap-admin-guard.ts), it does not reach Keycloak.
 */
describe('Basic login by an e-mail whose account cannot be told', () => {
  const authenticator = () => {
    const cache = createMemoryCache({ maxEntries: 1000 });
    const grants: string[] = [];
    const tokens: TokenClient = {
      passwordGrant: (realm, username) => {
        grants.push(`${realm} ${username}`);
        return Promise.resolve({
          ok: false,
          error: 'invalid_grant',
          description: 'Invalid user credentials',
        });
      },
      isActive: () => Promise.reject(new Error('not asked')),
    };
    const basic = createBasicAuthenticator({
      tokens,
      bearer: {} as BearerVerifier,
      cache,
      cacheSecret: 'test-secret-of-16-chars',
      maxCacheSeconds: 60,
      maxOutageSeconds: 0,
      keycloakDown: () => false,
      slowGrantPauseMs: 1000,
      maxLocalEntries: 100,
      failedLogins: createFailedLoginMemory({
        cache,
        secret: 'test-secret-of-16-chars',
        windowSeconds: 300,
      }),
      accounts: {
        accountOf: (_realm, name) =>
          Promise.resolve({ account: name.toLowerCase(), unresolved: true }),
      },
      loginLockMs: 10_000,
      throttle: {
        begin: () => Promise.resolve({ kind: 'go', attempt: { settle: () => Promise.resolve() } }),
      },
      refuses: (realm, username) => isBootstrapAdmin('admin', realm, username),
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
    });
    return { basic, grants };
  };
  const guess = { username: 'admin@corp.example', password: 'a-guess' };

  it('is refused in master, 503 with Retry-After, and no grant is made', async () => {
    const { basic, grants } = authenticator();
    const err = await Promise.resolve(basic.authenticate('master', guess, '198.51.100.7')).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ status: 503, result: '503-11001' });
    expect((err as AppError).headers['retry-after']).toMatch(/^\d+$/);
    expect(grants).toEqual([]);
  });

  it("goes on to Keycloak in an organization's realm, which has no bootstrap administrator", async () => {
    const { basic, grants } = authenticator();
    const err = await Promise.resolve(basic.authenticate('acme', guess, '198.51.100.7')).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ reason: 'wrong_password' });
    expect(grants).toEqual(['acme admin@corp.example']);
  });
});
