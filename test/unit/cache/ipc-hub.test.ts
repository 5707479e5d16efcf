import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIpcHub, type IpcHub } from '../../../src/cache/ipc-hub.ts';
import type { IpcPeer } from '../../../src/cache/ipc-peer.ts';

const WORKER = fileURLToPath(new URL('./fixtures/ipc-worker.ts', import.meta.url));

/**
 * The supervising process's hub with two real worker processes on their IPC channels: what one
 * worker counts, sets, publishes or keeps, the other sees.
 */
describe('IPC hub between worker processes', () => {
  let hub: IpcHub;
  const children: ChildProcess[] = [];
  const peers: IpcPeer[] = [];

  beforeAll(async () => {
    hub = createIpcHub({ maxEntries: 100 });
    for (let i = 0; i < 2; i++) {
      const child = fork(WORKER, { stdio: 'inherit' });
      children.push(child);
      const peer = hub.attach(child);
      const ready = new Promise<void>((resolve) => peer.serve('ready', () => resolve()));
      peers.push(peer);
      await ready;
    }
  });

  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode === null) {
        child.disconnect();
        await once(child, 'exit');
      }
    }
    await hub.close();
  });

  it('shares one counter and one cache', async () => {
    const [a, b] = peers;
    expect(await a!.call('increment', 'logins')).toMatchObject({ count: 1 });
    expect(await b!.call('increment', 'logins')).toMatchObject({ count: 2 });
    expect(await a!.call('increment', 'logins')).toMatchObject({ count: 3 });
    await a!.call('set', 'login', 'outcome');
    expect(await b!.call('get', 'login')).toBe('outcome');
    expect(await b!.call('get', 'absent')).toBeUndefined();
  });

  it('relays a message to every worker, its sender included, before answering', async () => {
    await peers[0]!.call('publish', 'revoked');
    // The relay was sent to both before the publish answered, on the channels the answers use.
    expect(await peers[0]!.call('received')).toEqual(['revoked']);
    expect(await peers[1]!.call('received')).toEqual(['revoked']);
  });

  it("recalls the key set a sibling fetched, and no realm's it did not", async () => {
    await peers[0]!.call('remember keys', 'acme', '{"keys":[]}');
    expect(await peers[1]!.call('recall keys', 'acme')).toBe('{"keys":[]}');
    expect(await peers[1]!.call('recall keys', 'other')).toBeNull();
    // ... handed to it at once (it adopts the set instead of fetching it), not to the sender.
    expect(await peers[1]!.call('fetched by siblings')).toEqual(['acme']);
    expect(await peers[0]!.call('fetched by siblings')).toEqual([]);
  });

  it('recalls the organizations a sibling confirmed, never one deleted since', async () => {
    const [a, b] = peers;
    const at = Date.now();
    const hour = 3_600_000;
    await a!.call('note org', 'acme', 'enabled', at, at + hour);
    await a!.call('note org', 'frozen', 'disabled', at, at + hour);
    expect(await b!.call('recall org', 'acme')).toEqual({ state: 'enabled', at });
    expect(await b!.call('recall org', 'frozen')).toEqual({ state: 'disabled', at });
    expect(await b!.call('recall org', 'never')).toBeNull();
    // Deleted (a change, kept as such): a database answer asked before it, told after, is older.
    await b!.call('note org', 'acme', 'absent', at + 10, at + hour);
    await a!.call('note org', 'acme', 'enabled', at + 5, at + 5 + hour);
    expect(await b!.call('recall org', 'acme')).toBeNull();
    // Found absent by a lookup (told already expired): forgets an older confirmation.
    await a!.call('note org', 'frozen', 'absent', at + 10, at + 10);
    expect(await b!.call('recall org', 'frozen')).toBeNull();
    // Created again later: newer than the deletion.
    await a!.call('note org', 'acme', 'enabled', at + 20, at + 20 + hour);
    expect(await b!.call('recall org', 'acme')).toEqual({ state: 'enabled', at: at + 20 });
  });

  it('keeps what a worker keeps for the others, by prefix', async () => {
    await peers[0]!.call('keep', 'revoked:1', 'one');
    await peers[0]!.call('keep', 'other:1', 'two');
    expect(await peers[1]!.call('kept', 'revoked:')).toEqual(['one']);
  });

  it('claims once for every worker, and a refused claim keeps its reason across the channel', async () => {
    const [a, b] = peers;
    expect(await a!.call('claim', 'jti-shared', 'calm')).toBe(true);
    expect(await b!.call('claim', 'jti-shared', 'calm')).toBe(false);
    // 100 claims: past 50 held, an owner holding 100 / 16 = 6 gets no more.
    let taken = 0;
    while ((await a!.call('claim', `flood-${taken}`, 'flood')) === true) taken += 1;
    expect(await a!.call('claim', `flood-${taken}`, 'flood')).toBe('refused: owner_share');
    expect(await b!.call('claim', 'jti-other', 'calm')).toBe(true);
  });

  it("returns a handler's error as a rejection with its message", async () => {
    await expect(peers[0]!.call('fail')).rejects.toThrow('refused here');
    await expect(peers[0]!.call('no-such-operation')).rejects.toThrow('no IPC operation');
  });

  it('forgets a worker that exits', async () => {
    const child = children[1]!;
    child.disconnect();
    await once(child, 'exit');
    expect(hub.peers.size).toBe(1);
  });
});
