import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRevocationList } from '../../../src/auth/revocation.ts';
import { sharedChannels } from '../../helpers/shared-channels.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const clock = manualClock(Date.parse('2026-11-27T10:00:00Z'));
const replicaOn = (channels: ReturnType<typeof sharedChannels>, id: string) =>
  createRevocationList({
    bus: channels.busOf(id),
    keyPrefix: 'unit:',
    metrics: { revocationApplied: () => undefined },
    logger: pino({ level: 'silent' }),
    clock,
  });

describe('the revocation channel between replicas', () => {
  it("applies another replica's revocation at once", async () => {
    const channels = sharedChannels();
    const a = await replicaOn(channels, 'a');
    const b = await replicaOn(channels, 'b');
    await a.revoke({
      realm: 'acme',
      userId: 'u1',
      sessionIds: ['s1'],
      ttlSeconds: 60,
      userTtlSeconds: 60,
    });
    expect(b.isSessionRevoked('s1')).toBe(true);
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
    expect(b.isSessionRevoked('s1')).toBe(false);
    // A string where the list of session ids belongs is not read letter by letter.
    expect(b.isSessionRevoked('s')).toBe(false);
    expect(b.isClientSessionRevoked('s1', 'app', 0)).toBe(false);
  });
});
