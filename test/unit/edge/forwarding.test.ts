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
    // Garbage vouched for by the peer leaves the peer as the client.
    expect(forwarding.clientAddress(request('::1', { 'x-forwarded-for': 'nonsense' }))).toBe('::1');
  });

  it('takes the last address vouched for when the whole chain is trusted (a client inside the trusted range)', () => {
    // TRUSTED_PROXIES=10.0.0.0/8, and clients in 10.x behind the load balancer 10.0.0.5: each is
    // its own client, not the load balancer (whose address every such client would share in
    // the login throttle's per-address count).
    const forwarding = createForwarding(parseTrustedProxies('10.0.0.0/8,::1'));
    const behindBalancer = (chain: string) =>
      forwarding.clientAddress(request('10.0.0.5', { 'x-forwarded-for': chain }));
    expect(behindBalancer('10.1.1.1')).toBe('10.1.1.1');
    expect(behindBalancer('10.2.2.2')).toBe('10.2.2.2');
    expect(behindBalancer('10.3.3.3, 10.0.0.6')).toBe('10.3.3.3');
    expect(forwarding.clientAddress(request('::1', { 'x-forwarded-for': '10.0.0.9' }))).toBe(
      '10.0.0.9',
    );
    // Garbage to the left of what a trusted proxy vouched for ends the walk there.
    expect(behindBalancer('nonsense, 10.4.4.4')).toBe('10.4.4.4');
    // An untrusted address still wins wherever it is.
    expect(behindBalancer('10.9.9.9, 198.51.100.7, 10.4.4.4')).toBe('198.51.100.7');
  });

  it('reads the addresses proxies write with a port or in brackets (Azure Application Gateway, IIS ARR)', () => {
    const forwarding = createForwarding(parseTrustedProxies('10.0.0.0/8'));
    const behindBalancer = (chain: string) =>
      forwarding.clientAddress(request('10.0.0.5', { 'x-forwarded-for': chain }));
    expect(behindBalancer('198.51.100.7:50123')).toBe('198.51.100.7');
    expect(behindBalancer('[2001:db8::7]:50123')).toBe('2001:db8::7');
    expect(behindBalancer('[2001:db8::8]')).toBe('2001:db8::8');
    expect(behindBalancer('6.6.6.6, 198.51.100.9:443, 10.0.0.6:8080')).toBe('198.51.100.9');
    // Not an address however it is read: the walk ends, as for any garbage.
    for (const garbage of [
      '198.51.100.7:',
      '198.51.100.7:x',
      '[198.51.100.7]',
      '[::1',
      'host:80',
    ]) {
      expect(behindBalancer(garbage), garbage).toBe('10.0.0.5');
    }
  });
});
