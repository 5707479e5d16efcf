import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { createRevocationList } from '../../../src/auth/revocation.ts';
import type { ReplicaBus } from '../../../src/cache/replica-bus.ts';
import { sharedChannels } from '../../helpers/shared-channels.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const clock = manualClock(Date.parse('2026-11-27T10:00:00Z'));
const replicaOn = (
  channels: ReturnType<typeof sharedChannels>,
  id: string,
  bus = channels.busOf(id),
) =>
  createRevocationList({
    bus,
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });
/** Session s1 of user u1 in realm acme ended: what a replica revokes here. */
const SESSION_S1_ENDED = {
  realm: 'acme',
  userId: 'u1',
  sessionIds: ['s1'],
  ttlSeconds: 60,
  userTtlSeconds: 60,
};

/** Users m0..m{count-1} of realm acme: their tokens and cached Basic logins ended at once. */
const membersEnded = (count: number, from = 0) => ({
  realm: 'acme',
  userId: '',
  userIds: Array.from({ length: count }, (_, i) => `m${from + i}`),
  sessionIds: [],
  ttlSeconds: 1,
  userTtlSeconds: 60,
  tokenTtlSeconds: 300,
});

/** `bus` with what it publishes recorded, and a store (as Redis' keys) replicas read at start. */
function recordingBus(bus: ReplicaBus, store: Map<string, string>) {
  const published: string[] = [];
  const publish = bus.publish.bind(bus);
  bus.publish = (channel, payload) => {
    published.push(payload);
    return publish(channel, payload);
  };
  bus.keep = (key, payload) => Promise.resolve(void store.set(key, payload));
  bus.kept = (prefix) =>
    Promise.resolve([...store].filter(([key]) => key.startsWith(prefix)).map(([, value]) => value));
  return { bus, published };
}

describe('the revocation channel between replicas', () => {
  it("refuses every listed user's tokens and cached logins on every replica from one message, and no one else's", async () => {
    const channels = sharedChannels();
    const { bus, published } = recordingBus(channels.busOf('a'), new Map());
    const a = await replicaOn(channels, 'a', bus);
    const b = await replicaOn(channels, 'b');
    const issuedAt = clock.now() / 1000 - 1;
    await a.revoke(membersEnded(1000));
    expect(published).toHaveLength(1);
    for (const list of [a, b]) {
      for (let i = 0; i < 1000; i++) {
        expect(list.isIssuedBeforeRevocation('acme', `m${i}`, issuedAt)).toBe(true);
        expect(list.userRevokedAt('acme', `m${i}`)).toBe(clock.now());
      }
      expect(list.isIssuedBeforeRevocation('acme', 'outsider', issuedAt)).toBe(false);
      expect(list.userRevokedAt('acme', 'outsider')).toBeUndefined();
      expect(list.isIssuedBeforeRevocation('other', 'm0', issuedAt)).toBe(false);
      // A token issued after it is served.
      expect(list.isIssuedBeforeRevocation('acme', 'm0', clock.now() / 1000 + 1)).toBe(false);
    }
  });

  it('keeps two lists of users ended in one millisecond apart for a replica that starts later', async () => {
    const channels = sharedChannels();
    const store = new Map<string, string>();
    const a = await replicaOn(channels, 'a', recordingBus(channels.busOf('a'), store).bus);
    await a.revoke(membersEnded(1000));
    await a.revoke(membersEnded(1000, 1000));
    const later = await replicaOn(channels, 'c', recordingBus(channels.busOf('c'), store).bus);
    const issuedAt = clock.now() / 1000 - 1;
    expect(later.isIssuedBeforeRevocation('acme', 'm0', issuedAt)).toBe(true);
    expect(later.isIssuedBeforeRevocation('acme', 'm1999', issuedAt)).toBe(true);
  });

  it("applies another replica's revocation at once", async () => {
    const channels = sharedChannels();
    const a = await replicaOn(channels, 'a');
    const b = await replicaOn(channels, 'b');
    await a.revoke(SESSION_S1_ENDED);
    expect(b.isSessionRevoked('acme', 's1')).toBe(true);
    // In its realm only: a realm's logout names no session of another.
    expect(b.isSessionRevoked('other', 's1')).toBe(false);
  });

  it('reads what anyone with Redis access publishes as hostile: a payload not of its shape changes nothing and throws nothing', async () => {
    const channels = sharedChannels();
    const b = await replicaOn(channels, 'b');
    const payloads = [
      'not json',
      'null',
      '{"realm":"acme","userId":"u1","sessionIds":"s1","at":0,"ttlSeconds":60,"userTtlSeconds":60}',
      '{"realm":"acme","userId":"u1","sessionIds":["s1"],"at":0,"ttlSeconds":-1,"userTtlSeconds":60}',
      '{"realm":"acme","userId":"u1","sessionIds":["s1"],"at":0,"ttlSeconds":60,"userTtlSeconds":60,"clientSessions":[{"sessionId":1}]}',
    ];
    for (const payload of payloads) {
      expect(() => channels.publish('unit:revocations', payload)).not.toThrow();
    }
    expect(b.isSessionRevoked('acme', 's1')).toBe(false);
    // A string where the list of session ids belongs is not read letter by letter.
    expect(b.isSessionRevoked('acme', 's')).toBe(false);
    expect(b.isClientSessionRevoked('acme', 's1', 'app', 0)).toBe(false);
  });

  it('offers a revocation again a second later when Redis, up, did not take it, without waiting for a reconnection', async () => {
    vi.useFakeTimers();
    try {
      const channels = sharedChannels();
      const bus = channels.busOf('a');
      // The revocation's own attempt and the one it makes at once when Redis says it is up.
      let timeOuts = 2;
      const publish = bus.publish.bind(bus);
      bus.publish = (channel, payload) =>
        timeOuts-- > 0 ? Promise.reject(new Error('Command timed out')) : publish(channel, payload);
      const a = await replicaOn(channels, 'a', bus);
      const b = await replicaOn(channels, 'b');
      await a.revoke(SESSION_S1_ENDED);
      expect(a.isSessionRevoked('acme', 's1')).toBe(true);
      expect(b.isSessionRevoked('acme', 's1')).toBe(false);
      await vi.advanceTimersByTimeAsync(1000);
      expect(b.isSessionRevoked('acme', 's1')).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});
