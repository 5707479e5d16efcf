import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { createRevocationList } from '../../../src/auth/revocation.ts';
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

describe('the revocation channel between replicas', () => {
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
    expect(b.isClientSessionRevoked('s1', 'app', 0)).toBe(false);
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
