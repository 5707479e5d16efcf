import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type CryptoKey, type JWK } from 'jose';
import type { Logger } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createJwksRegistry, type JwksRegistry } from '../../../../src/auth/bearer/jwks.ts';
import { REALM_GONE_MEMORY_MS } from '../../../../src/auth/gone-realms.ts';
import { createLocalKeySetMemory } from '../../../../src/auth/bearer/key-set-memory.ts';
import {
  refreshDelayMs,
  UNKNOWN_KID_GAP_MS,
} from '../../../../src/auth/bearer/key-set-schedule.ts';
import { currentRequestId, inRequest } from '../../../../src/edge/request-context.ts';
import { AppError } from '../../../../src/envelope/errors.ts';
import { keycloakError } from '../../../../src/keycloak/keycloak-failures.ts';

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const REALM = 'acme';

interface TestKey {
  kid: string;
  jwk: JWK;
  privateKey: CryptoKey;
}

async function testKey(kid: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  return {
    kid,
    privateKey,
    jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
  };
}

function tokenOf(key: TestKey, kid = key.kid): Promise<string> {
  return new SignJWT({ sub: 'u1' })
    .setProtectedHeader({ alg: 'RS256', kid })
    .setIssuedAt()
    .sign(key.privateKey);
}

/**
 * A scripted Keycloak certs endpoint: what it publishes now (or that it cannot be reached), and
 * when it was asked (ms after T0). A fetch takes `fetchMs` of the fake clock.
 */
function scriptedCerts() {
  const certs = {
    published: [] as TestKey[],
    down: false,
    /** What Keycloak answers about the realm instead of its set: none, deleted, or a proxy's 404. */
    notFound: undefined as 'realm' | 'proxy' | undefined,
    fetchMs: 0,
    /** Answer with what was published when the fetch was asked, not when it answers. */
    answersAsAsked: false,
    asked: [] as number[],
    /** The request id each fetch ran under (see edge/request-context.ts). */
    requestIds: [] as Array<string | undefined>,
    calls: {
      async exchange<T>(
        _kind: string,
        _path: string,
        _form: string | undefined,
        read: (status: number, body: string) => T,
      ): Promise<T> {
        certs.asked.push(Date.now() - T0);
        certs.requestIds.push(currentRequestId());
        const asked = certs.published;
        if (certs.fetchMs > 0) await new Promise((resolve) => setTimeout(resolve, certs.fetchMs));
        const published = certs.answersAsAsked ? asked : certs.published;
        if (certs.down) throw keycloakError('unreachable');
        if (certs.notFound === 'realm') return read(404, '{"error":"Realm does not exist"}');
        if (certs.notFound === 'proxy') return read(404, '<html>Not Found</html>');
        return read(200, JSON.stringify({ keys: published.map((key) => key.jwk) }));
      },
    },
  };
  return certs;
}

/**
 * What verifying `token` ends in: `ok`, or the class of the error (the result code of an
 * AppError), with the fake clock moved on by the gap an unknown kid may wait.
 */
async function verifyWith(jwks: JwksRegistry, token: string): Promise<string> {
  const outcome = verifyNow(jwks, token);
  await vi.advanceTimersByTimeAsync(UNKNOWN_KID_GAP_MS);
  return outcome;
}

/** The same, with the clock moved by the caller. */
async function verifyNow(jwks: JwksRegistry, token: string): Promise<string> {
  try {
    await jwtVerify(token, jwks.keySetFor(REALM), { algorithms: ['RS256'] });
    return 'ok';
  } catch (err) {
    return err instanceof AppError ? err.result : (err as Error).constructor.name;
  }
}

describe('the wait before a realm’s next key-set fetch', () => {
  it('is the interval less at most a fifth, never more', () => {
    expect(refreshDelayMs(30, () => 0)).toBe(30_000);
    expect(refreshDelayMs(30, () => 0.5)).toBe(27_000);
    expect(refreshDelayMs(30, () => 0.999999)).toBe(24_000);
  });
});

/**
 * The key-set registry on an injected clock (vitest's fake `Date` and timers; promises and
 * signatures are real): when a removed key stops verifying, what an outage keeps, and how many
 * fetches random kids cost. key-rotation.test.ts shows the same against the real Keycloak.
 */
describe('the key-set registry (KEY_SET_REFRESH_SECONDS=30)', () => {
  let a: TestKey;
  let b: TestKey;
  const registries: JwksRegistry[] = [];
  const registryOf = (
    certs: ReturnType<typeof scriptedCerts>,
    memory = createLocalKeySetMemory(),
    logger?: Logger,
  ) => {
    const jwks = createJwksRegistry({
      calls: certs.calls,
      refreshSeconds: 30,
      memory,
      random: () => 0,
      logger,
    });
    registries.push(jwks);
    return jwks;
  };

  beforeEach(async () => {
    a ??= await testKey('key-a');
    b ??= await testKey('key-b');
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    for (const jwks of registries.splice(0)) jwks.close();
    vi.useRealTimers();
  });

  it('fetches no key set of a realm the gateway does not serve; asks once for one held', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const asked: Array<[string, string | undefined]> = [];
    let served = false;
    const jwks = createJwksRegistry({
      calls: certs.calls,
      refreshSeconds: 30,
      random: () => 0,
      serves: (realm, client) => {
        asked.push([realm, client]);
        return served;
      },
    });
    registries.push(jwks);
    const token = await tokenOf(a);
    const outcome = async (client: string) => {
      try {
        await jwtVerify(token, jwks.keySetFor(REALM, client), { algorithms: ['RS256'] });
        return 'ok';
      } catch (err) {
        return (err as Error).constructor.name;
      }
    };
    expect(await outcome('10.0.0.1')).toBe('RealmNotServed');
    expect(await outcome('10.0.0.2')).toBe('RealmNotServed');
    expect(certs.asked).toEqual([]);
    served = true;
    expect(await outcome('10.0.0.3')).toBe('ok');
    expect(await outcome('10.0.0.4')).toBe('ok');
    // Held now: the directory is not asked again, and one fetch served both.
    expect(asked).toEqual([
      [REALM, '10.0.0.1'],
      [REALM, '10.0.0.2'],
      [REALM, '10.0.0.3'],
    ]);
    expect(certs.asked).toHaveLength(1);
  });

  it('drops a key Keycloak no longer publishes within 30 s, for tokens seen and unseen', async () => {
    const certs = scriptedCerts();
    certs.published = [a, b];
    const jwks = registryOf(certs);
    expect(await verifyNow(jwks, await tokenOf(a))).toBe('ok');
    expect(jwks.publishes(REALM, 'key-a')).toBe(true);

    certs.published = [b];
    await vi.advanceTimersByTimeAsync(29_999);
    expect(jwks.publishes(REALM, 'key-a')).toBe(true);
    await vi.advanceTimersByTimeAsync(1);
    expect(certs.asked).toEqual([0, 30_000]);
    // A remembered token of key A fails the fast path; verified again, it is refused.
    expect(jwks.publishes(REALM, 'key-a')).toBe(false);
    expect(jwks.publishes(REALM, 'key-b')).toBe(true);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('JWKSNoMatchingKey');
    expect(await verifyWith(jwks, await tokenOf(b))).toBe('ok');
  });

  it('keeps the last good set while Keycloak cannot be reached, then follows it again', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyNow(jwks, await tokenOf(a))).toBe('ok');
    certs.down = true;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(certs.asked).toEqual([0, 30_000, 60_000]);
    expect(jwks.publishes(REALM, 'key-a')).toBe(true);
    expect(jwks.lastFailure(REALM)).toBeInstanceOf(AppError);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    // An unknown kid cannot be told from a new key: the outage's 503, not a refusal.
    expect(await verifyWith(jwks, await tokenOf(b))).toBe('503-11001');

    certs.down = false;
    certs.published = [b];
    await vi.advanceTimersByTimeAsync(30_000);
    expect(jwks.lastFailure(REALM)).toBeUndefined();
    expect(jwks.kidsOf(REALM)).toEqual(['key-b']);
  });

  it('verifies a new key on first sight, even right after a fetch, with one fetch per second for any number of unknown kids', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    expect(certs.asked).toEqual([0]);

    // Key B appears 100 ms after that fetch: its token waits for a fetch that starts after it
    // arrived, the gap after the last one ...
    certs.published = [a, b];
    vi.setSystemTime(T0 + 100);
    const tokens = [
      await tokenOf(b),
      // ... and so do tokens with random kids meanwhile: they share that one fetch.
      ...(await Promise.all(Array.from({ length: 20 }, (_, i) => tokenOf(a, `rnd-${i}`)))),
    ];
    const outcomes = Promise.all(tokens.map((token) => verifyNow(jwks, token)));
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_GAP_MS);
    const [first, ...random] = await outcomes;
    expect(first).toBe('ok');
    expect(new Set(random)).toEqual(new Set(['JWKSNoMatchingKey']));
    expect(certs.asked).toEqual([0, UNKNOWN_KID_GAP_MS]);

    // More random kids, one every 100 ms for 3 s: at most one fetch per second.
    for (let ms = 0; ms < 3000; ms += 100) {
      void verifyNow(jwks, await tokenOf(a, `more-${ms}`));
      await vi.advanceTimersByTimeAsync(100);
    }
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_GAP_MS);
    const gaps = certs.asked.slice(1).map((at, i) => at - certs.asked[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(UNKNOWN_KID_GAP_MS);
    expect(certs.asked.length).toBeLessThanOrEqual(2 + 4);
  });

  it('verifies a new key within the gap after the clock stepped back (NTP, a VM restored), not the step later', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    certs.published = [a, b];
    vi.setSystemTime(T0 - 120_000);
    let outcome: string | undefined;
    void verifyNow(jwks, await tokenOf(b)).then((got) => (outcome = got));
    await vi.advanceTimersByTimeAsync(UNKNOWN_KID_GAP_MS);
    // The verification itself takes real time (WebCrypto); each wait moves the clock 20 ms on.
    await vi.waitFor(() => expect(outcome).toBe('ok'), { timeout: 3000, interval: 20 });
    expect(certs.asked).toHaveLength(2);
  });

  it('does not take a fetch begun before the clock stepped back for one begun after a token arrived', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    // A fetch under way (it answers with the set it was asked for: key A alone) ...
    certs.fetchMs = 500;
    certs.answersAsAsked = true;
    vi.setSystemTime(T0 + 5000);
    void jwks.refresh(REALM);
    await vi.advanceTimersByTimeAsync(100);
    // ... when the clock steps back and key B appears: B's token needs a fetch of its own, though
    // the running one's start reads as after the token's arrival.
    vi.setSystemTime(T0 - 120_000);
    certs.published = [a, b];
    let outcome: string | undefined;
    void verifyNow(jwks, await tokenOf(b)).then((got) => (outcome = got));
    await vi.advanceTimersByTimeAsync(400 + UNKNOWN_KID_GAP_MS + 500);
    await vi.waitFor(() => expect(outcome).toBe('ok'), { timeout: 3000, interval: 20 });
    expect(certs.asked).toHaveLength(3);
  });

  it('fetches for the request that needs the set under its id, and on schedule under none', async () => {
    // Real timers: the request's context travels through Node's timers, not the fake ones.
    vi.useRealTimers();
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = createJwksRegistry({ calls: certs.calls, refreshSeconds: 0.05 });
    registries.push(jwks);
    const token = await tokenOf(a);
    expect(await inRequest('req-1', () => verifyNow(jwks, token))).toBe('ok');
    // The next fetch comes a second after the first at the earliest (UNKNOWN_KID_GAP_MS).
    await vi.waitFor(() => expect(certs.requestIds.length).toBeGreaterThanOrEqual(2), {
      timeout: 5000,
    });
    expect(certs.requestIds.slice(0, 2)).toEqual(['req-1', undefined]);
  });

  it('refresh fetches now, and never rejects', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    await jwks.refresh(REALM);
    expect(jwks.kidsOf(REALM)).toEqual(['key-a']);
    certs.published = [b];
    vi.setSystemTime(T0 + 5000);
    await jwks.refresh(REALM);
    expect(jwks.kidsOf(REALM)).toEqual(['key-b']);
    expect(certs.asked).toEqual([0, 5000]);
    certs.down = true;
    vi.setSystemTime(T0 + 10_000);
    await expect(jwks.refresh(REALM)).resolves.toBeUndefined();
    expect(jwks.kidsOf(REALM)).toEqual(['key-b']);
  });

  it('stops fetching a realm unused for 10 minutes; its next token fetches it again', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    await vi.advanceTimersByTimeAsync(15 * 60_000);
    const fetches = certs.asked.length;
    // Fetched every 30 s until 10 minutes after the last use, then no more.
    expect(fetches).toBeLessThanOrEqual(1 + 21);
    expect(jwks.publishes(REALM, 'key-a')).toBe(false);
    await vi.advanceTimersByTimeAsync(5 * 60_000);
    expect(certs.asked.length).toBe(fetches);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
  });

  it('adopts the set a sibling worker fetched, and counts its own next fetch from that one', async () => {
    let sibling: ((realm: string, body: string, startedAt: number) => void) | undefined;
    const memory = {
      ...createLocalKeySetMemory(),
      onSiblingFetch: (l: typeof sibling) => void (sibling = l),
    };
    const certs = scriptedCerts();
    certs.published = [a, b];
    const jwks = registryOf(certs, memory);
    expect(await verifyNow(jwks, await tokenOf(a))).toBe('ok');
    await vi.advanceTimersByTimeAsync(20_000);
    // A sibling's fetch that started at 20 s no longer found key A.
    sibling!(REALM, JSON.stringify({ keys: [b.jwk] }), T0 + 20_000);
    expect(jwks.publishes(REALM, 'key-a')).toBe(false);
    expect(jwks.kidsOf(REALM)).toEqual(['key-b']);
    // No fetch of its own at 30 s: the next is 30 s after the sibling's.
    await vi.advanceTimersByTimeAsync(29_999);
    expect(certs.asked).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1);
    expect(certs.asked).toEqual([0, 50_000]);
    // An older set (a fetch that started before the one held) is not adopted.
    sibling!(REALM, JSON.stringify({ keys: [a.jwk, b.jwk] }), T0 + 40_000);
    expect(jwks.kidsOf(REALM)).toEqual(['key-a', 'key-b']);
    sibling!(REALM, JSON.stringify({ keys: [b.jwk] }), T0 + 45_000);
    expect(jwks.kidsOf(REALM)).toEqual(['key-a', 'key-b']);
  });

  it('starts from the set a sibling fetched when Keycloak cannot be reached', async () => {
    const memory = createLocalKeySetMemory();
    memory.remember(REALM, JSON.stringify({ keys: [a.jwk] }), T0);
    const certs = scriptedCerts();
    certs.down = true;
    const jwks = registryOf(certs, memory);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
  });

  it('drops a realm Keycloak no longer has: its tokens refused, its fetches stopped, said once', async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const warn = vi.fn();
    const jwks = registryOf(certs, undefined, { warn } as unknown as Logger);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    certs.notFound = 'realm';
    await vi.advanceTimersByTimeAsync(30_000);
    expect(certs.asked).toEqual([0, 30_000]);
    expect(jwks.publishes(REALM, 'key-a')).toBe(false);
    expect(jwks.kidsOf(REALM)).toEqual([]);
    // No schedule any more: nothing fetched for as long as no token comes.
    await vi.advanceTimersByTimeAsync(5 * 60_000);
    expect(certs.asked).toEqual([0, 30_000]);
    // Tokens that keep coming cost one fetch per remembered span, and are refused as of a realm
    // gone: at once while Keycloak's answer is remembered, without a fetch.
    const tokens = await Promise.all([1, 2, 3].map(() => tokenOf(a)));
    const outcomes = await Promise.all(tokens.map((token) => verifyNow(jwks, token)));
    expect(outcomes).toEqual(['RealmGone', 'RealmGone', 'RealmGone']);
    expect(certs.asked.length).toBe(3);
    await vi.advanceTimersByTimeAsync(REALM_GONE_MEMORY_MS - 1);
    expect(await verifyNow(jwks, await tokenOf(a))).toBe('RealmGone');
    expect(certs.asked.length).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(await verifyNow(jwks, await tokenOf(a))).toBe('RealmGone');
    expect(certs.asked.length).toBe(4);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toEqual({ realm: REALM });
  });

  it('starts over for a realm created again under the name', async () => {
    const certs = scriptedCerts();
    certs.notFound = 'realm';
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('RealmGone');
    certs.notFound = undefined;
    certs.published = [b];
    await vi.advanceTimersByTimeAsync(REALM_GONE_MEMORY_MS);
    expect(await verifyWith(jwks, await tokenOf(b))).toBe('ok');
    // Scheduled again, as any realm in use.
    const fetches = certs.asked.length;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(certs.asked.length).toBe(fetches + 1);
  });

  it("keeps the last good set on a 404 that is not Keycloak's answer for a missing realm", async () => {
    const certs = scriptedCerts();
    certs.published = [a];
    const jwks = registryOf(certs);
    expect(await verifyWith(jwks, await tokenOf(a))).toBe('ok');
    certs.notFound = 'proxy';
    await vi.advanceTimersByTimeAsync(30_000);
    expect(jwks.lastFailure(REALM)).toBeInstanceOf(AppError);
    expect(jwks.publishes(REALM, 'key-a')).toBe(true);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(certs.asked).toEqual([0, 30_000, 60_000]);
  });
});
