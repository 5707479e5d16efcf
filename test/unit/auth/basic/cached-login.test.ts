import { describe, expect, it } from 'vitest';
import {
  cachedLoginOf,
  longestServedSeconds,
  parseCachedLogin,
} from '../../../../src/auth/basic/cached-login.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { testPrincipal } from '../../../helpers/principal.ts';

const NOW = Date.parse('2026-11-25T10:00:00.000Z');

function principal(expiresInSeconds: number): Principal {
  return testPrincipal({
    method: 'basic',
    issuedAt: NOW / 1000,
    expiresAt: NOW / 1000 + expiresInSeconds,
  });
}

describe('a cached Basic login and its two bounds', () => {
  it('is fresh for the cache bound and kept for the outage bound, both from its grant', () => {
    const login = cachedLoginOf(principal(86_400), { cacheSeconds: 60, outageSeconds: 3600 }, NOW);
    expect(login).toMatchObject({ until: NOW + 60_000, keptUntil: NOW + 3_600_000 });
  });

  it('never outlives its token, fresh or kept', () => {
    const login = cachedLoginOf(principal(30), { cacheSeconds: 60, outageSeconds: 3600 }, NOW);
    expect(login).toMatchObject({ until: NOW + 30_000, keptUntil: NOW + 30_000 });
    expect(cachedLoginOf(principal(0), { cacheSeconds: 60, outageSeconds: 3600 }, NOW)).toBe(
      undefined,
    );
  });

  it('is kept no longer than fresh when the outage bound is 0 or shorter', () => {
    for (const outageSeconds of [0, 10]) {
      const login = cachedLoginOf(principal(86_400), { cacheSeconds: 60, outageSeconds }, NOW);
      expect(login).toMatchObject({ until: NOW + 60_000, keptUntil: NOW + 60_000 });
    }
  });

  it('is not cached at all without a cache bound', () => {
    const bounds = { cacheSeconds: 0, outageSeconds: 3600 };
    expect(cachedLoginOf(principal(86_400), bounds, NOW)).toBe(undefined);
    expect(longestServedSeconds(bounds)).toBe(0);
  });

  it('makes revocations remembered for the longest a login may be served', () => {
    expect(longestServedSeconds({ cacheSeconds: 60, outageSeconds: 3600 })).toBe(3600);
    expect(longestServedSeconds({ cacheSeconds: 60, outageSeconds: 0 })).toBe(60);
  });

  it('reads back what it stored; an entry of an older replica is kept no longer than fresh', () => {
    const login = cachedLoginOf(principal(86_400), { cacheSeconds: 60, outageSeconds: 3600 }, NOW);
    expect(parseCachedLogin(JSON.stringify(login))).toEqual(login);
    const older = { principal: principal(86_400), until: NOW + 60_000 };
    expect(parseCachedLogin(JSON.stringify(older))).toEqual({ ...older, keptUntil: NOW + 60_000 });
  });

  it('reads anything else as no login', () => {
    for (const value of ['', 'not json', 'null', '42', '{}', '{"until":1}', '{"principal":{}}']) {
      expect(parseCachedLogin(value)).toBe(undefined);
    }
  });
});
