import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createProofChecker } from '../../../../src/auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from '../../../../src/auth/dpop/dpop-replay.ts';
import type { Clock } from '../../../../src/time/clock.ts';
import type { Cache } from '../../../../src/cache/cache.ts';
import { createFallbackCache } from '../../../../src/cache/fallback-cache.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { dpopKey, dpopProof } from '../../../helpers/dpop.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const clock = manualClock();
const proof = (jti: string) => ({ jti, acceptableUntil: clock.now() + 60_000 });

/** A shared cache (two replicas' view of one Redis) that can be made to fail. */
function sharedRedis() {
  const store = createMemoryCache({ maxEntries: 100, clock });
  let down = false;
  const guard = <T>(work: () => Promise<T>) =>
    down ? Promise.reject(new Error('Redis down')) : work();
  const cache: Cache = {
    kind: 'redis',
    get: (key) => guard(() => store.get(key)),
    set: (key, value, ttl) => guard(() => store.set(key, value, ttl)),
    delete: (key) => guard(() => store.delete(key)),
    increment: (key, window, by) => guard(() => store.increment(key, window, by)),
    claim: (key, ttl) => guard(() => store.claim(key, ttl)),
    counter: (key) => guard(() => store.counter(key)),
    ping: () => guard(() => store.ping()),
    close: () => Promise.resolve(),
  };
  return { cache, fail: () => (down = true) };
}

const replicaOn = (redis: Cache) =>
  createProofReplayStore({
    cache: createFallbackCache(
      redis,
      createMemoryCache({ maxEntries: 100, clock }),
      pino({ enabled: false }),
      clock,
    ),
    clock,
  });

/** A replica of Redis `redis` on a clock of its own: its proof checker and its replay store. */
const clockedReplica = (redis: Cache, replicaClock: Clock) => ({
  check: createProofChecker({
    algorithms: ['ES256'],
    maxAgeSeconds: 60,
    aheadSeconds: 5,
    maxCachedKeys: 10,
    clock: replicaClock,
  }),
  replay: createProofReplayStore({ cache: redis, clock: replicaClock }),
});
type ClockedReplica = ReturnType<typeof clockedReplica>;

/**
 * A client's proof for one request, made now on the right clock; `used` is a replica taking it as
 * a request does: checked on the replica's clock, then its first use or a replay.
 */
async function clientProof() {
  const key = await dpopKey();
  const url = 'https://gw.example/api/acme/platform/workspaces';
  const request = { method: 'GET', htu: url, accessToken: 'token', boundKey: key.thumbprint };
  const made = await dpopProof(key, {
    method: 'GET',
    url,
    accessToken: 'token',
    iat: Math.floor(clock.now() / 1000),
  });
  const used = async (on: ClockedReplica) =>
    on.replay.firstUse(key.thumbprint, await on.check(made, request));
  return { made, request, used };
}

describe('the replay store of DPoP proofs', () => {
  it('accepts a jti once per key across replicas sharing Redis, the same jti of another key too', async () => {
    const redis = sharedRedis();
    const [a, b] = [replicaOn(redis.cache), replicaOn(redis.cache)];
    expect(await a.firstUse('key-1', proof('j1'))).toBe(true);
    expect(await b.firstUse('key-1', proof('j1'))).toBe(false);
    expect(await b.firstUse('key-2', proof('j1'))).toBe(true);
  });

  it('forgets a jti once its proof is out of the window', async () => {
    const redis = sharedRedis();
    const store = replicaOn(redis.cache);
    const made = proof('j2');
    expect(await store.firstUse('key-1', made)).toBe(true);
    clock.advance(60_001);
    expect(await store.firstUse('key-1', made)).toBe(true);
  });

  it('while Redis fails, falls back as the cache does: once per process, not across replicas', async () => {
    const redis = sharedRedis();
    const [a, b] = [replicaOn(redis.cache), replicaOn(redis.cache)];
    redis.fail();
    expect(await a.firstUse('key-1', proof('j3'))).toBe(true);
    expect(await a.firstUse('key-1', proof('j3'))).toBe(false);
    // The documented gap: the other replica's memory has not seen it.
    expect(await b.firstUse('key-1', proof('j3'))).toBe(true);
  });

  it("refuses a replay on a replica whose clock is behind, as long as that replica still accepts the proof's iat", async () => {
    // Replica A's clock is Redis's; B's runs 3 s behind it (inside the 5 s a proof may be ahead).
    const redis = sharedRedis();
    const behind: Clock = { now: () => clock.now() - 3_000 };
    const [a, b] = [clockedReplica(redis.cache, clock), clockedReplica(redis.cache, behind)];
    const { made, request, used } = await clientProof();

    expect(await used(a)).toBe(true);
    // 61 s on: too old for A, 58 s old for B, which still takes it.
    clock.advance(61_000);
    await expect(a.check(made, request)).rejects.toMatchObject({ reason: 'bad_proof' });
    expect(await used(b)).toBe(false);
  });
});

describe('the replay store of DPoP proofs, replicas whose clocks differ', () => {
  it('refuses a replay on a replica whose clock is right, after one whose clock runs ahead took the proof', async () => {
    // Replica A's clock runs 20 s ahead (nothing notices: clients' proofs are only 20 s older to
    // it); B's is right, as is the client's.
    const redis = sharedRedis();
    const ahead: Clock = { now: () => clock.now() + 20_000 };
    const [a, b] = [clockedReplica(redis.cache, ahead), clockedReplica(redis.cache, clock)];
    const { used } = await clientProof();

    expect(await used(a)).toBe(true);
    // 50 s on: 50 s old for B, which still takes it, as a replay.
    clock.advance(50_000);
    expect(await used(b)).toBe(false);
  });
});

describe('the replay store of DPoP proofs without Redis (process memory)', () => {
  // The store a gateway without Redis uses, and every replica's fallback during an outage;
  // bounded as MEMORY_CACHE_MAX_ENTRIES bounds it, small here.
  const inMemory = () => {
    const cache = createMemoryCache({ maxEntries: 3, clock });
    return { cache, store: createProofReplayStore({ cache, clock }) };
  };

  it('refuses a replay however many proofs came between: a live jti is never pushed out', async () => {
    const { store } = inMemory();
    const captured = proof('captured');
    expect(await store.firstUse('victim', captured)).toBe(true);
    // Fresh proofs of keys the sender holds (its own bound tokens), as many as the bound.
    for (const sender of ['sender-1', 'sender-2']) {
      expect(await store.firstUse(sender, proof(`flood-${sender}`))).toBe(true);
    }
    // Beyond the bound, while every proof held is in its window: refused for what it is, never
    // a replay let in, never called a replay either.
    await expect(store.firstUse('sender-3', proof('flood-3'))).rejects.toMatchObject({
      scheme: 'dpop',
      reason: 'proof_store_full',
      publicMessage: expect.not.stringMatching(/used before/) as unknown,
    });
    expect(await store.firstUse('victim', captured)).toBe(false);
  });

  it('takes new proofs again once the ones it holds leave their window', async () => {
    const { store } = inMemory();
    for (let i = 0; i < 4; i++)
      await store.firstUse(`sender-${i}`, proof(`early-${i}`)).catch(() => false);
    clock.advance(60_001);
    expect(await store.firstUse('sender', proof('later'))).toBe(true);
  });

  it("refuses one key's flood beyond its share, and not the proofs of other keys", async () => {
    // 32 proofs: past 16 held, a key holding 32 / 16 = 2 gets no more.
    const cache = createMemoryCache({ maxEntries: 32, clock });
    const store = createProofReplayStore({ cache, clock });
    let accepted = 0;
    for (;;) {
      const used = await store
        .firstUse('flooder', proof(`flood-${accepted}`))
        .catch((err: unknown) => err);
      if (used !== true) {
        expect(used).toMatchObject({ scheme: 'dpop', reason: 'proof_key_share' });
        break;
      }
      accepted++;
    }
    expect(accepted).toBe(16);
    for (const key of ['alice', 'bob', 'carol']) {
      expect(await store.firstUse(key, proof(`${key}-1`))).toBe(true);
      expect(await store.firstUse(key, proof(`${key}-2`))).toBe(true);
      expect(await store.firstUse(key, proof(`${key}-1`))).toBe(false);
    }
    // The flooder's proofs taken before are still replays.
    expect(await store.firstUse('flooder', proof('flood-0'))).toBe(false);
  });

  it("pushes out no other entry's counter (failed logins)", async () => {
    const { cache, store } = inMemory();
    await cache.increment('failures:u', 60_000);
    for (let i = 0; i < 3; i++)
      await store.firstUse(`sender-${i}`, proof(`flood-${i}`)).catch(() => false);
    expect(await cache.counter('failures:u')).toMatchObject({ count: 1 });
  });
});
