import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * What the front does with each new connection: `forward` it to the real Keycloak, `hang`
 * (accept, read, never answer), answer `garbage` (HTTP 200 whose body is not JSON), answer
 * `notFound` to every request as a proxy does whose Keycloak is away (404 with the proxy's own
 * page, not Keycloak's "Realm not found."; the requests are recorded in `seen`), or be `closed`
 * (nothing listens on the port: connections are refused).
 */
export type FrontMode = 'forward' | 'hang' | 'garbage' | 'notFound' | 'closed';

/** The head of one request that went through the front to Keycloak. */
export interface FrontRequest {
  method: string;
  /** The request target as sent, e.g. `/auth/realms/acme/protocol/openid-connect/token`. */
  target: string;
  /** Lowercase names; a repeated header's values joined with ', '. */
  headers: Record<string, string>;
}

export interface KeycloakFront {
  /** Base URL to give the gateway as Keycloak's, e.g. `http://127.0.0.1:41234/auth`. */
  readonly url: string;
  /** Every request forwarded to Keycloak so far, in order; tests empty it between cases. */
  readonly seen: FrontRequest[];
  /** Switches mode; connections open until now are cut, so kept-alive ones cannot bypass it. */
  set(mode: FrontMode): Promise<void>;
  /**
   * While forwarding, holds Keycloak's answer to a request whose target matches `target` for
   * `ms` before passing it on (a Keycloak busy hashing passwords); `ms` 0 ends the hold.
   */
  hold(target: RegExp, ms: number): void;
  /**
   * While forwarding, holds Keycloak's answer to the next request whose target matches
   * `target` until `open()`: `reached` resolves once that answer is at the front, so Keycloak
   * has computed it, and a test can change Keycloak in between (a race made certain).
   */
  gate(target: RegExp): { reached: Promise<void>; open(): void };
  /**
   * Counts, from now on, the requests whose target matches `target` that are in flight at once
   * (sent on, their answer not yet begun at the client): `peak` is the most there were together,
   * `count` how many there were in all.
   */
  track(target: RegExp): { readonly peak: number; readonly count: number };
  close(): Promise<void>;
}

const GARBAGE =
  'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 18\r\n\r\n<html>hello</html>';

/** A proxy's 404 page, as an ingress answers for a backend it has no endpoint of. */
const PROXY_PAGE =
  '<html><head><title>404 Not Found</title></head><body>404 Not Found</body></html>';
const PROXY_NOT_FOUND = `HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: ${Buffer.byteLength(PROXY_PAGE)}\r\n\r\n${PROXY_PAGE}`;

/**
 * A TCP front on a port of its own, in front of the real Keycloak (`keycloakUrl`), that can
 * misbehave on demand: the gateway under test is pointed at it instead of at Keycloak.
 */
export async function startKeycloakFront(keycloakUrl: string): Promise<KeycloakFront> {
  const target = new URL(keycloakUrl);
  const sockets = new Set<Socket>();
  let mode: FrontMode = 'forward';
  const seen: FrontRequest[] = [];
  let held: { target: RegExp; ms: number } = { target: /$^/, ms: 0 };
  interface Gate {
    target: RegExp;
    reach(): void;
    opened: Promise<void>;
    /** The request it holds the answer of; the gate holds no other. */
    request?: FrontRequest;
  }
  const gates: Gate[] = [];
  const tracked: { target: RegExp; inFlight: number; peak: number; count: number }[] = [];
  let server: Server | undefined;
  let port = 0;

  function serve(client: Socket): void {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    switch (mode) {
      case 'forward': {
        const upstream = connect(Number(target.port), target.hostname);
        // Each chunk of an answer is passed on when due (see `hold`), in order.
        let passed = Promise.resolve();
        sockets.add(upstream);
        upstream.on('close', () => sockets.delete(upstream));
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => void passed.then(() => client.destroy()));
        // This connection's requests: an answer is to the last one sent.
        const mine: FrontRequest[] = [];
        const record = recordHeads(mine);
        // The tracks counting this connection's request in flight (one at a time: no pipelining).
        let counting: typeof tracked = [];
        client.on('data', (chunk: Buffer) => {
          const before = mine.length;
          record(chunk);
          seen.push(...mine.slice(before));
          for (const request of mine.slice(before)) {
            counting = tracked.filter((t) => t.target.test(request.target));
            for (const t of counting) {
              t.count += 1;
              t.inFlight += 1;
              t.peak = Math.max(t.peak, t.inFlight);
            }
          }
        });
        client.pipe(upstream);
        upstream.on('data', (chunk: Buffer) => {
          const last = mine.at(-1);
          const gate =
            last &&
            gates.find((g) => g.request === last || (!g.request && g.target.test(last.target)));
          if (gate) {
            gate.request = last;
            gate.reach();
            passed = passed.then(() => gate.opened);
          }
          const due = Date.now() + (last && held.target.test(last.target) ? held.ms : 0);
          // Its answer is begun once this chunk reaches the client.
          const answered = counting;
          counting = [];
          passed = passed
            .then(
              () => new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now()))),
            )
            .then(() => {
              for (const t of answered) t.inFlight -= 1;
              client.write(chunk);
            });
        });
        return;
      }
      case 'hang':
        client.resume();
        return;
      case 'garbage':
        client.on('data', () => client.write(GARBAGE));
        return;
      case 'notFound': {
        const mine: FrontRequest[] = [];
        const record = recordHeads(mine);
        client.on('data', (chunk: Buffer) => {
          const before = mine.length;
          record(chunk);
          for (const request of mine.slice(before)) {
            seen.push(request);
            client.write(PROXY_NOT_FOUND);
          }
        });
        return;
      }
      case 'closed':
        client.destroy();
        return;
    }
  }

  async function open(): Promise<void> {
    server = createServer(serve);
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }

  async function shut(): Promise<void> {
    for (const socket of sockets) socket.destroy();
    const closing = server;
    server = undefined;
    if (closing) await new Promise((resolve) => closing.close(resolve));
  }

  await open();
  return {
    url: `http://127.0.0.1:${port}${target.pathname.replace(/\/$/, '')}`,
    seen,
    async set(next) {
      mode = next;
      for (const socket of sockets) socket.destroy();
      if (next === 'closed' && server) await shut();
      if (next !== 'closed' && !server) await open();
    },
    hold(target, ms) {
      held = { target, ms };
    },
    gate(target) {
      let reach = () => undefined as void;
      let open = () => undefined as void;
      const reached = new Promise<void>((resolve) => (reach = resolve));
      const opened = new Promise<void>((resolve) => (open = resolve));
      gates.push({ target, reach, opened });
      return { reached, open };
    },
    track(target) {
      const counts = { target, inFlight: 0, peak: 0, count: 0 };
      tracked.push(counts);
      return {
        get peak() {
          return counts.peak;
        },
        get count() {
          return counts.count;
        },
      };
    },
    close: shut,
  };
}

/**
 * Reads the request heads out of one connection's bytes toward Keycloak (HTTP/1.1, bodies with
 * `Content-Length` or chunked), for tests that show what the gateway sent.
 */
function recordHeads(into: FrontRequest[]): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let bodyLeft = 0;
  let chunked = false;
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (bodyLeft > 0) {
        const skipped = Math.min(bodyLeft, pending.length);
        pending = pending.subarray(skipped);
        bodyLeft -= skipped;
        if (bodyLeft > 0) return;
      }
      if (chunked) {
        const end = pending.indexOf('\r\n0\r\n\r\n');
        const empty = pending.indexOf('0\r\n\r\n') === 0;
        if (end < 0 && !empty) return;
        pending = pending.subarray(empty ? 5 : end + 7);
        chunked = false;
      }
      const headEnd = pending.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const [requestLine = '', ...lines] = pending
        .subarray(0, headEnd)
        .toString('latin1')
        .split('\r\n');
      pending = pending.subarray(headEnd + 4);
      const [method = '', target = ''] = requestLine.split(' ');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
      }
      into.push({ method, target, headers });
      bodyLeft = Number(headers['content-length'] ?? 0);
      chunked = /chunked/i.test(headers['transfer-encoding'] ?? '');
    }
  };
}
