import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAccessRevocations } from '../../../src/auth-proxy/access-revocations.ts';
import type { RevocationList } from '../../../src/auth/revocation.ts';

const DAY = 24 * 3600;

/** The revocations over a list that records what it is given, the lifetime read by `read`. */
function revocationsWith(read: (realm: string) => Promise<number>) {
  const revoked: Parameters<RevocationList['revoke']>[0][] = [];
  const reads: string[] = [];
  const access = createAccessRevocations({
    revocations: {
      revoke: (revocation) => {
        revoked.push(revocation);
        return Promise.resolve();
      },
    } as RevocationList,
    accessTokenSeconds: (realm) => {
      reads.push(realm);
      return read(realm);
    },
    leewaySeconds: 5,
    basicCacheSeconds: 60,
    logger: pino({ level: 'silent' }),
  });
  return { access, revoked, reads };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the revocations of a session or a user', () => {
  it("refuse a session's tokens as long as the realm's tokens live, its cached logins with it", async () => {
    const { access, revoked } = revocationsWith(() => Promise.resolve(300));
    await (
      await access.endSessions('acme', ['s1'], 'u1')
    )();
    expect(revoked).toEqual([
      { realm: 'acme', userId: 'u1', sessionIds: ['s1'], ttlSeconds: 305, userTtlSeconds: 0 },
    ]);
  });

  it("refuse every token of a user issued before now, and the user's cached logins", async () => {
    const { access, revoked } = revocationsWith(() => Promise.resolve(300));
    await (
      await access.endUser('acme', 'u1', true)
    )();
    expect(revoked).toEqual([
      {
        realm: 'acme',
        userId: 'u1',
        sessionIds: [],
        ttlSeconds: 1,
        userTtlSeconds: 60,
        tokenTtlSeconds: 305,
      },
    ]);
  });

  it("refuse the tokens and cached logins of many users (a group's members) in a few revocations, each user in one", async () => {
    const { access, revoked, reads } = revocationsWith(() => Promise.resolve(300));
    const members = Array.from({ length: 2500 }, (_, i) => `m${i}`);
    await (
      await access.endUsers('acme', members)
    )();
    expect(revoked).toHaveLength(3);
    expect(revoked.flatMap((revocation) => revocation.userIds ?? [])).toEqual(members);
    for (const revocation of revoked) {
      expect(revocation.userIds!.length).toBeLessThanOrEqual(1000);
      expect(revocation).toMatchObject({ realm: 'acme', userId: '', sessionIds: [] });
      expect(revocation).toMatchObject({ userTtlSeconds: 60, tokenTtlSeconds: 305 });
    }
    expect(reads).toEqual(['acme']);
  });

  it('read the realm lifetime twice for a burst of endings: the read in flight, and one after', async () => {
    const { access, reads } = revocationsWith(() => Promise.resolve(300));
    await Promise.all(Array.from({ length: 200 }, (_, i) => access.endSessions('acme', [`s${i}`])));
    expect(reads).toEqual(['acme', 'acme']);
  });

  it('size each refusal by a read begun after the ending came, not by an older one', async () => {
    let lifetime = 300;
    const { access, revoked, reads } = revocationsWith(() => Promise.resolve(lifetime));
    const first = access.endSessions('acme', ['s1']);
    // The administrator lengthens the lifetime while the first ending's read is in flight.
    lifetime = 86400;
    const second = access.endSessions('acme', ['s2']);
    await (
      await first
    )();
    await (
      await second
    )();
    // And once the reads are over, the next ending reads again.
    lifetime = 3600;
    await (
      await access.endSessions('acme', ['s3'])
    )();
    expect(revoked.map((revocation) => revocation.ttlSeconds)).toEqual([305, 86405, 3605]);
    expect(reads).toEqual(['acme', 'acme', 'acme']);
  });

  it('refuse for a day when the lifetime cannot be read, and ask again next time', async () => {
    const { access, revoked, reads } = revocationsWith(() => Promise.reject(new Error('503')));
    await (
      await access.endSessions('acme', ['s1'])
    )();
    await access.endSessions('acme', ['s2']);
    expect(revoked[0]?.ttlSeconds).toBe(DAY);
    expect(reads).toEqual(['acme', 'acme']);
  });

  it('with a wait bound, are prepared within it while the admin API hangs (for a day)', async () => {
    vi.useFakeTimers();
    const { access, revoked } = revocationsWith(() => new Promise<number>(() => undefined));
    const prepared = access.endSessions('acme', ['s1'], 'u1', 1000);
    await vi.advanceTimersByTimeAsync(1000);
    await (
      await prepared
    )();
    expect(revoked[0]?.ttlSeconds).toBe(DAY);
  });
});
