import { describe, expect, it } from 'vitest';
import { createBasicAuthenticator } from '../../../../src/auth/basic/basic-authenticator.ts';
import { isBootstrapAdmin } from '../../../../src/auth/bootstrap-admin.ts';
import { createFailedLoginMemory } from '../../../../src/auth/failed-logins.ts';
import type { TokenClient } from '../../../../src/keycloak/token-client.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { settledBasicDeps } from '../../../helpers/basic-deps.ts';
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
      ...settledBasicDeps(),
      tokens,
      cache,
      failedLogins: createFailedLoginMemory({
        cache,
        secret: 'test-secret-of-16-chars',
        windowSeconds: 300,
      }),
      accounts: {
        accountOf: (_realm, name) =>
          Promise.resolve({ account: name.toLowerCase(), unresolved: true }),
      },
      throttle: {
        begin: () => Promise.resolve({ kind: 'go', attempt: { settle: () => Promise.resolve() } }),
      },
      refuses: (realm, username) => isBootstrapAdmin('admin', realm, username),
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
