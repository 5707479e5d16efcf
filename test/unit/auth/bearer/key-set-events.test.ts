import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createKeySetEvents } from '../../../../src/auth/bearer/key-set-events.ts';
import type { ReplicaBus } from '../../../../src/cache/replica-bus.ts';
import { sharedChannels } from '../../../helpers/shared-channels.ts';

const logger = pino({ level: 'silent' });

/** A replica's key-set events, and the realms its registry was told to refresh. */
async function replicaOf(bus: ReplicaBus) {
  const refreshed: string[] = [];
  const events = await createKeySetEvents({
    bus,
    keyPrefix: 'unit:',
    logger,
    jwks: { refresh: (realm) => Promise.resolve(void refreshed.push(realm)) },
  });
  return { events, refreshed };
}

describe('a forced key-set refresh between replicas', () => {
  it('refreshes here once and on every other replica, each time it is asked', async () => {
    const channels = sharedChannels();
    const a = await replicaOf(channels.busOf('a'));
    const b = await replicaOf(channels.busOf('b'));
    await a.events.refreshEverywhere('acme');
    await a.events.refreshEverywhere('acme');
    await b.events.refreshEverywhere('master');
    expect(a.refreshed).toEqual(['acme', 'acme', 'master']);
    expect(b.refreshed).toEqual(['acme', 'acme', 'master']);
  });

  it('ignores messages that are not its own kind (anyone with Redis access can publish)', async () => {
    const channels = sharedChannels();
    const a = await replicaOf(channels.busOf('a'));
    for (const payload of [
      'not json',
      'null',
      JSON.stringify({ realm: 'acme', from: 'x' }),
      JSON.stringify({ realm: '../admin', from: 'x', id: '1' }),
      JSON.stringify({ realm: 42, from: 'x', id: '1' }),
    ]) {
      channels.publish('unit:key-sets', payload);
    }
    expect(a.refreshed).toEqual([]);
  });

  it('still refreshes here when the bus does not take the message', async () => {
    const a = await replicaOf(sharedChannels().busOf('a', true));
    await a.events.refreshEverywhere('acme');
    expect(a.refreshed).toEqual(['acme']);
  });
});
