import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createKeycloakCalls,
  type KeycloakCallKind,
  type KeycloakCallOutcome,
} from '../../../src/keycloak/keycloak-calls.ts';
import { createKeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';
import { listenLocally } from '../../helpers/local-server.ts';

/** The calls' timeout (KEYCLOAK_TIMEOUT_MS) and a grant's (AUTH_PROXY_TIMEOUT_MS). */
const TIMEOUT_MS = 200;
const GRANT_TIMEOUT_MS = 1000;
/** Grants of one realm that one node sends at once: its grant places less the realms' share. */
const REALM_PLACES = 21;

/**
 * A fake Keycloak node. `busy`: answers its probe (`/realms/master`) at once and every other
 * request with an answer that trickles on and never ends, as a node alive but slow (the
 * exchange's idle timeout never strikes: only a call waiting for a place ends by its limit).
 * `hung`: answers nothing. `answering`: answers every request at once.
 */
interface FakeNode {
  url: string;
  /** The requests but probes it received. */
  grants: number;
  close(): Promise<void>;
}

async function startNode(mode: 'busy' | 'hung' | 'answering'): Promise<FakeNode> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const answer = (socket: Socket) =>
    socket.write(
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}',
    );
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      const line = chunk.toString('latin1').split('\r\n')[0]!;
      if (!/^(GET|POST) /.test(line)) return;
      const probe = line.startsWith('GET /auth/realms/master ');
      if (!probe) node.grants++;
      if (mode === 'answering' || (mode === 'busy' && probe)) answer(socket);
      else if (mode === 'busy') {
        socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n');
        socket.write('transfer-encoding: chunked\r\n\r\n');
        const timer = setInterval(() => socket.write('1\r\n \r\n'), TIMEOUT_MS / 4);
        timers.add(timer);
        socket.on('close', () => clearInterval(timer));
      }
    });
  });
  const node: FakeNode = {
    url: `${await listenLocally(server)}/auth`,
    grants: 0,
    async close() {
      for (const timer of timers) clearInterval(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return node;
}

/**
 * A call that finds no place on its node waits for one within its time limit, in the gateway:
 * nothing was sent. Its node is not to blame (not probed, not taken out, the metrics do not
 * count a Keycloak timeout), and its limit is spent: not tried again elsewhere with a fresh one.
 * A grant still waiting for a place when its node is found hung was not sent either: it may go
 * to another node, within what is left of its limit.
 */
describe('Keycloak calls: waiting for a place', () => {
  const opened: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    for (const node of opened.splice(0)) await node.close();
  });

  function layer(urls: string[], grantTimeoutMs = GRANT_TIMEOUT_MS) {
    const seen: [KeycloakCallKind, KeycloakCallOutcome][] = [];
    const nodes = createKeycloakNodes({ urls, timeoutMs: TIMEOUT_MS });
    const callFailed = vi.spyOn(nodes, 'callFailed');
    const calls = createKeycloakCalls({
      nodes,
      timeoutMs: TIMEOUT_MS,
      grantTimeoutMs,
      observer: { onCall: (kind, outcome) => seen.push([kind, outcome]) },
    });
    const grant = (realm: string) => {
      const started = performance.now();
      return calls
        .exchange('grant', `/realms/${realm}/protocol/openid-connect/token`, 'x=1', (s) => s)
        .then(
          (status) => ({ status, ms: performance.now() - started }),
          (err: { status: number }) => ({ status: err.status, ms: performance.now() - started }),
        );
    };
    opened.push({ close: () => Promise.resolve(nodes.close()) });
    return { calls, nodes, seen, callFailed, grant };
  }

  it('a grant that got no place fails 504 as its own outcome, its node not blamed', async () => {
    const node = await startNode('busy');
    opened.push(node);
    const { calls, nodes, seen, callFailed, grant } = layer([node.url]);
    const fleet = Array.from({ length: REALM_PLACES }, () => grant('fleet'));
    await expect.poll(() => node.grants).toBe(REALM_PLACES);
    // Through `exchange`, and as the token client calls (`call` around `send`).
    const viaCall = calls
      .call('grant', () =>
        calls.send('grant', '/realms/fleet/protocol/openid-connect/token', 'x=1', (s) => s),
      )
      .catch((err: { status: number }) => err.status);
    expect(await Promise.all([grant('fleet'), viaCall])).toMatchObject([{ status: 504 }, 504]);
    expect(node.grants).toBe(REALM_PLACES);
    expect(seen).toEqual([
      ['grant', 'no_place'],
      ['grant', 'no_place'],
    ]);
    expect(callFailed).not.toHaveBeenCalled();
    expect(nodes.all[0]!.state).toBe('up');
    await node.close();
    await Promise.all(fleet);
  }, 20_000);

  it('a grant that got no place is not tried again on another node past its limit', async () => {
    const a = await startNode('busy');
    const b = await startNode('busy');
    opened.push(a, b);
    const { grant } = layer([a.url, b.url]);
    // Round robin: each node sends its realm share, then the last ones wait for a place.
    const sent = Array.from({ length: 2 * REALM_PLACES }, () => grant('fleet'));
    const waiting = Array.from({ length: 8 }, () => grant('fleet'));
    for (const { status, ms } of await Promise.all(waiting)) {
      expect(status).toBe(504);
      expect(ms).toBeLessThan(1.5 * GRANT_TIMEOUT_MS);
    }
    expect(a.grants + b.grants).toBe(2 * REALM_PLACES);
    await a.close();
    await b.close();
    await Promise.all(sent);
  }, 20_000);

  it('a grant still waiting for a place on a node found hung goes to another node', async () => {
    const hung = await startNode('hung');
    const healthy = await startNode('answering');
    opened.push(hung, healthy);
    // A grant's limit far past the moment the hung node is found out (its calls' timeout and
    // its probe's): a grant that waited for its own limit shows, on a loaded machine too.
    const grantTimeoutMs = 10_000;
    const { nodes, grant } = layer([hung.url, healthy.url], grantTimeoutMs);
    const count = 2 * (REALM_PLACES + 1);
    const ended = await Promise.all(Array.from({ length: count }, () => grant('fleet')));
    expect(nodes.all.map((node) => node.state)).toEqual(['down', 'up']);
    // Those the hung node got are cut off (504: they may have created a session there); every
    // other one, the grant that waited there for a place included, the healthy node answered.
    expect(hung.grants).toBe(REALM_PLACES);
    expect(ended.filter(({ status }) => status === 200)).toHaveLength(count - hung.grants);
    for (const { ms } of ended) expect(ms).toBeLessThan(grantTimeoutMs);
  }, 30_000);

  it('a grant tried again on another node has what is left of its limit', async () => {
    const hung = await startNode('hung');
    const busy = await startNode('busy');
    opened.push(hung, busy);
    const { grant } = layer([hung.url, busy.url]);
    // Round robin from the hung node: each node sends its realm share, then one waits for a place.
    const grants = Array.from({ length: 2 * (REALM_PLACES + 1) }, () => grant('fleet'));
    const atHung = grants.filter((_, i) => i % 2 === 0);
    // The one that waited on the hung node goes to the busy node once the hung one is found out,
    // waits there for a place too, and fails within its first limit, not a fresh one.
    const ended = await Promise.all([...atHung, grants.at(-1)!]);
    for (const { status, ms } of ended) {
      expect(status).toBe(504);
      expect(ms).toBeLessThan(1.2 * GRANT_TIMEOUT_MS);
    }
    expect(busy.grants).toBe(REALM_PLACES);
    await busy.close();
    await Promise.all(grants);
  }, 20_000);
});
