import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createKeycloakNodes,
  displayUrlOf,
  type KeycloakNode,
} from '../../../src/keycloak/keycloak-nodes.ts';

const URLS = ['http://kc-0:8080/auth', 'http://kc-1:8080/auth', 'http://kc-2:8080/auth'];

/** Nodes whose probe answers for the URLs in `answering`; every change is recorded. */
function nodesOf(urls: string[], answering: Set<string>) {
  const changes: string[] = [];
  const probed: string[] = [];
  const nodes = createKeycloakNodes({
    urls,
    timeoutMs: 1000,
    probeIntervalMs: 2000,
    probe: (url) => {
      probed.push(url);
      return answering.has(url) ? Promise.resolve() : Promise.reject(new Error('refused'));
    },
    onChange: (node, reason) => changes.push(`${node.index} ${node.state}: ${reason}`),
  });
  return { nodes, changes, probed };
}

const indexes = (picked: KeycloakNode[]) => picked.map((node) => node.index);

describe('Keycloak nodes: selection and state', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2026-11-23T12:00:00Z') });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('goes round robin over the nodes that are up', () => {
    const { nodes } = nodesOf(URLS, new Set(URLS));
    expect(indexes(Array.from({ length: 6 }, () => nodes.pick()))).toEqual([0, 1, 2, 0, 1, 2]);
    nodes.failed(nodes.all[1]!, 'grant call: unreachable');
    expect(indexes(Array.from({ length: 4 }, () => nodes.pick()))).toEqual([0, 2, 0, 2]);
    nodes.close();
  });

  it('still tries a node when every node is down, in turn', () => {
    const { nodes } = nodesOf(URLS, new Set());
    for (const node of nodes.all) nodes.failed(node, 'timeout');
    expect(indexes(Array.from({ length: 4 }, () => nodes.pick()))).toEqual([0, 1, 2, 0]);
    expect(nodes.other(nodes.all[0]!)).toBeUndefined();
    nodes.close();
  });

  it('names another node that is up for a retry, never the failed one', () => {
    const { nodes } = nodesOf(URLS, new Set(URLS));
    const [a, b, c] = nodes.all as [KeycloakNode, KeycloakNode, KeycloakNode];
    expect(nodes.other(a)).toBe(b);
    nodes.failed(b, 'timeout');
    expect(nodes.other(a)).toBe(c);
    expect(nodes.other(c)).toBe(a);
    nodes.failed(c, 'timeout');
    expect(nodes.other(a)).toBeUndefined();
    nodes.close();
  });

  it('with one node, always picks it, whatever its state', () => {
    const { nodes } = nodesOf([URLS[0]!], new Set());
    nodes.failed(nodes.all[0]!, 'timeout');
    expect(indexes([nodes.pick(), nodes.pick()])).toEqual([0, 0]);
    expect(nodes.other(nodes.all[0]!)).toBeUndefined();
    nodes.close();
  });

  it('probes only the nodes that are down, every interval, and takes them back when they answer', async () => {
    const answering = new Set([URLS[0]!, URLS[2]!]);
    const { nodes, changes, probed } = nodesOf(URLS, answering);
    // Nothing is probed while every node is up.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probed).toEqual([]);

    nodes.failed(nodes.all[1]!, 'introspection call: timeout');
    expect(nodes.all[1]).toMatchObject({ state: 'down', since: Date.now() });
    const downSince = Date.now();
    await vi.advanceTimersByTimeAsync(1999);
    expect(probed).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(probed).toEqual([URLS[1]]);
    await vi.advanceTimersByTimeAsync(2000);
    expect(probed).toEqual([URLS[1], URLS[1]]);
    expect(nodes.all[1]).toMatchObject({ state: 'down', since: downSince });

    answering.add(URLS[1]!);
    await vi.advanceTimersByTimeAsync(2000);
    expect(nodes.all[1]).toMatchObject({ state: 'up', since: Date.now() });
    // Every node up again: the probing stops.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probed).toHaveLength(3);
    expect(changes).toEqual(['1 down: introspection call: timeout', '1 up: probe answered']);
    nodes.close();
  });

  it('takes a node back when a call gets an answer from it, and reports a change once', () => {
    const { nodes, changes } = nodesOf(URLS, new Set());
    const node = nodes.all[2]!;
    nodes.failed(node, 'grant call: unreachable');
    nodes.failed(node, 'grant call: unreachable');
    nodes.answered(node);
    nodes.answered(node);
    expect(changes).toEqual(['2 down: grant call: unreachable', '2 up: answered a call']);
    nodes.close();
  });

  it('decides once what a failed call says of its node: unreachable is down, a timeout is probed, a bad answer nothing', async () => {
    const { nodes, changes, probed } = nodesOf(URLS, new Set([URLS[1]!]));
    const [a, b, c] = nodes.all as [KeycloakNode, KeycloakNode, KeycloakNode];
    nodes.callFailed(a, 'bad_answer', 'grant call');
    nodes.callFailed(a, 'unreachable', 'grant call');
    // A busy node answers its probe and stays in; a hung one fails it and goes out.
    nodes.callFailed(b, 'timeout', '/auth proxy');
    nodes.callFailed(c, 'timeout', 'admin call');
    await vi.advanceTimersByTimeAsync(0);
    expect(probed).toEqual([URLS[1], URLS[2]]);
    expect([a.state, b.state, c.state]).toEqual(['down', 'up', 'down']);
    expect(changes).toEqual([
      '0 down: grant call: unreachable',
      '2 down: admin call: timeout, then probe failed: refused',
    ]);
    nodes.close();
  });

  it('check() probes every node and returns their states', async () => {
    const { nodes, probed } = nodesOf(URLS, new Set([URLS[1]!]));
    const states = await nodes.check();
    expect(probed.toSorted()).toEqual(URLS);
    expect(states.map((node) => node.state)).toEqual(['down', 'up', 'down']);
    nodes.close();
  });

  it('stops probing when closed', async () => {
    const { nodes, probed } = nodesOf(URLS, new Set());
    nodes.failed(nodes.all[0]!, 'timeout');
    nodes.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probed).toEqual([]);
  });

  it('shows a URL without credentials, query or fragment', () => {
    expect(displayUrlOf('http://user:secret@kc-0:8080/auth?x=1#y')).toBe('http://kc-0:8080/auth');
  });
});
