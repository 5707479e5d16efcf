import { describe, expect, it } from 'vitest';
import { addressGroupOf } from '../../../src/edge/address-group.ts';

describe('addressGroupOf', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(addressGroupOf('198.51.100.7')).toBe('198.51.100.7');
  });

  it('groups the IPv6 addresses of one /64, however written', () => {
    const group = '2001:db8:1:2::/64';
    for (const address of [
      '2001:db8:1:2::1',
      '2001:db8:1:2:a1b2:c3d4:e5f6:789',
      '2001:0DB8:0001:0002:ffff:ffff:ffff:ffff',
      '2001:db8:1:2::7%eth0',
    ]) {
      expect(addressGroupOf(address), address).toBe(group);
    }
    expect(addressGroupOf('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressGroupOf('2001:db8::5')).toBe('2001:db8::/64');
    expect(addressGroupOf('2001:0:0:1::5')).toBe('2001:0:0:1::/64');
    expect(addressGroupOf('::1')).toBe('::/64');
    expect(addressGroupOf('fe80::1')).toBe('fe80::/64');
  });

  it('reads an IPv4-mapped IPv6 address as its IPv4 address', () => {
    for (const address of ['::ffff:192.0.2.7', '::FFFF:192.0.2.7', '0:0:0:0:0:ffff:c000:207']) {
      expect(addressGroupOf(address), address).toBe('192.0.2.7');
    }
  });

  it('keeps anything that is no address as it is', () => {
    expect(addressGroupOf('')).toBe('');
    expect(addressGroupOf('unknown')).toBe('unknown');
  });
});
