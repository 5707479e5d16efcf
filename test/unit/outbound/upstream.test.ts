import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { bodyFraming, createUpstream, hasBody } from '../../../src/outbound/upstream.ts';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

describe('the body rule (RFC 9112 6.3)', () => {
  it.each([
    [{}, false],
    [{ 'content-length': '0' }, false],
    [{ 'content-length': '00' }, false],
    [{ 'content-length': '5' }, true],
    [{ 'transfer-encoding': 'chunked' }, true],
  ])('%j has a body: %s', (headers, expected) => {
    expect(hasBody(request(headers))).toBe(expected);
  });

  it('frames a body read whole by its length, one of unknown length chunked, else nothing', () => {
    const chunked = request({ 'transfer-encoding': 'chunked' });
    expect(bodyFraming(chunked, Buffer.from('a=1'))).toEqual(['content-length', '3']);
    expect(bodyFraming(chunked)).toEqual(['transfer-encoding', 'chunked']);
    // The client's Content-Length travels on through the header filter.
    expect(bodyFraming(request({ 'content-length': '5' }))).toEqual([]);
    expect(bodyFraming(request({}))).toEqual([]);
  });
});

describe('an upstream read from its URL', () => {
  it('names its Host and base path as the URL does', () => {
    expect(createUpstream('http://127.0.0.1:8080/auth/', { maxSockets: 1 })).toMatchObject({
      host: '127.0.0.1:8080',
      basePath: '/auth',
    });
    expect(createUpstream('https://kc.example/auth', { maxSockets: 1 })).toMatchObject({
      host: 'kc.example',
      basePath: '/auth',
    });
    expect(createUpstream('http://[::1]:9000', { maxSockets: 1 })).toMatchObject({
      host: '[::1]:9000',
      basePath: '',
    });
  });

  it('sends to the base path on an IPv6 address, with the headers given', async () => {
    const seen: Array<{ url?: string; host?: string }> = [];
    const server = createServer((req, res) => {
      seen.push({ url: req.url, host: req.headers.host });
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '::1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const upstream = createUpstream(`http://[::1]:${port}/auth/`, { maxSockets: 1 });
      const status = await new Promise<number | undefined>((resolve, reject) => {
        const outgoing = upstream.request('GET', '/realms/x?a=1', ['host', upstream.host], 5000);
        outgoing.on('response', (answer) => {
          answer.resume();
          resolve(answer.statusCode);
        });
        outgoing.on('error', reject);
        outgoing.end();
      });
      expect(status).toBe(200);
      expect(seen).toEqual([{ url: '/auth/realms/x?a=1', host: `[::1]:${port}` }]);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("an upstream pool's share per client", () => {
  it('counts an IPv6 host by its /64: one share for every address of it', () => {
    // A pool of 16: a share of 2, the last 2 kept for clients holding less.
    const upstream = createUpstream('http://127.0.0.1:8080', { maxSockets: 16 });
    const admitted = (clients: string[]) => clients.filter((c) => upstream.admit(c)).length;
    // 14 places from one /64, a new address each, then none of the kept 2.
    const host = Array.from({ length: 16 }, (_, i) => `2001:db8:1:2::${(i + 1).toString(16)}`);
    expect(admitted(host)).toBe(14);
    // Another /64 and another IPv4 client behind the same NAT64 each take one of them.
    expect(admitted(['2001:db8:1:3::1', '64:ff9b::192.0.2.7'])).toBe(2);
    // Its places given back under any address of the /64: its share free again.
    for (const address of host.slice(0, 14)) upstream.release(address.replace('::', ':0:0:0:'));
    expect(admitted(['2001:db8:1:2::ffff'])).toBe(1);
  });
});
