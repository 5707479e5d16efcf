import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { parseTrustedProxies } from '../../../src/config/trusted-proxies.ts';
import { createForwarding } from '../../../src/edge/forwarding.ts';
import { clientForwardedHeaders } from '../../../src/outbound/forwarded-headers.ts';

function request(peer: string, headers: Record<string, string> = {}, encrypted = false) {
  return {
    socket: { remoteAddress: peer, encrypted },
    headers: { host: 'gw:8000', ...headers },
  } as unknown as IncomingMessage;
}

describe('forwarding headers and the client address', () => {
  const claims = {
    'x-forwarded-for': '6.6.6.6',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'evil',
  };

  it('says what the gateway saw when no proxy is trusted, whatever the client claims', () => {
    const forwarding = createForwarding(undefined);
    const req = request('203.0.113.9', claims);
    expect(forwarding.clientAddress(req)).toBe('203.0.113.9');
    expect(clientForwardedHeaders(forwarding.forwarded(req))).toEqual([
      'x-forwarded-for',
      '203.0.113.9',
      'x-forwarded-proto',
      'http',
      'x-forwarded-host',
      'gw:8000',
    ]);
    expect(
      clientForwardedHeaders(forwarding.forwarded(request('::ffff:10.0.0.1', {}, true))),
    ).toEqual([
      'x-forwarded-for',
      '10.0.0.1',
      'x-forwarded-proto',
      'https',
      'x-forwarded-host',
      'gw:8000',
    ]);
  });

  it('believes a trusted proxy, and takes the first untrusted address of the chain as the client', () => {
    const forwarding = createForwarding(parseTrustedProxies('10.0.0.0/8,::1'));
    const req = request('10.0.0.5', {
      ...claims,
      'x-forwarded-for': '6.6.6.6, 198.51.100.7, 10.1.1.1',
    });
    expect(forwarding.clientAddress(req)).toBe('198.51.100.7');
    expect(forwarding.forwarded(req)).toEqual({
      for: '6.6.6.6, 198.51.100.7, 10.1.1.1, 10.0.0.5',
      proto: 'https',
      host: 'evil',
    });
    expect(clientForwardedHeaders(forwarding.forwarded(req))).toEqual([
      'x-forwarded-for',
      '6.6.6.6, 198.51.100.7, 10.1.1.1, 10.0.0.5',
      'x-forwarded-proto',
      'https',
      'x-forwarded-host',
      'evil',
    ]);
    // An untrusted peer's claims are ignored even when they name trusted addresses.
    expect(
      forwarding.clientAddress(request('198.51.100.7', { 'x-forwarded-for': '10.0.0.1' })),
    ).toBe('198.51.100.7');
    // A chain of only trusted addresses, or garbage, leaves the peer as the client.
    expect(forwarding.clientAddress(request('::1', { 'x-forwarded-for': '10.0.0.9' }))).toBe('::1');
    expect(forwarding.clientAddress(request('::1', { 'x-forwarded-for': 'nonsense' }))).toBe('::1');
  });
});
