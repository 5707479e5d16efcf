import fc from 'fast-check';
import { isIP } from 'node:net';
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

  it('reads the other IPv6 forms that embed an IPv4 address as that address', () => {
    for (const address of [
      // NAT64's well-known prefix (RFC 6052): every IPv4 client a NAT64 lets in comes as one.
      '64:ff9b::192.0.2.7',
      '64:ff9b::c000:207',
      '0064:FF9B:0:0:0:0:c000:0207',
      // IPv4-translated (RFC 2765, SIIT).
      '::ffff:0:192.0.2.7',
      '::ffff:0:c000:207',
      // IPv4-compatible (RFC 4291 2.5.5.1, deprecated).
      '::192.0.2.7',
      '::c000:207',
    ]) {
      expect(addressGroupOf(address), address).toBe('192.0.2.7');
    }
  });

  it('keeps :: and ::1 (and the rest of ::/104) IPv6, never an address of 0.0.0.0/8', () => {
    for (const address of ['::', '::1', '::0.0.0.1', '::2', '::ff:ffff', '::0.255.255.255']) {
      expect(addressGroupOf(address), address).toBe('::/64');
    }
    // NAT64's prefix with a /64 of its own past the /96 is no embedding: its /64.
    expect(addressGroupOf('64:ff9b:0:0:1::c000:207')).toBe('64:ff9b::/64');
    expect(addressGroupOf('64:ff9b:1::c000:207')).toBe('64:ff9b:1::/64');
  });

  it('keeps anything that is no address as it is', () => {
    expect(addressGroupOf('')).toBe('');
    expect(addressGroupOf('unknown')).toBe('unknown');
  });
});

/** An IPv6 address's eight 16-bit groups, zeros often (so that `::` has runs to take). */
const groups = fc.array(
  fc.oneof(fc.constant(0), fc.constant(0xffff), fc.integer({ max: 0xffff, min: 0 })),
  {
    minLength: 8,
    maxLength: 8,
  },
);

/** How one address is written: each choice a writer may make (RFC 4291 2.2). */
interface Writing {
  /** Per group: its hex digits in upper case. */
  upper: boolean[];
  /** Per group: leading zeros added (up to four digits). */
  padding: number[];
  /** The last 32 bits as a dotted IPv4 address. */
  dotted: boolean;
  /** Which run of zero groups is written `::`, if any (modulo the runs and none). */
  compress: number;
  /** A zone id after it (`%eth0`). */
  zone: boolean;
}

const writing: fc.Arbitrary<Writing> = fc.record({
  upper: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  padding: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 8, maxLength: 8 }),
  dotted: fc.boolean(),
  compress: fc.nat(),
  zone: fc.boolean(),
});

/** `address` as one writer would write it; always an address `isIP` takes. */
function written(address: number[], w: Writing): string {
  const hex = address.map((g, i) => {
    const digits = g.toString(16);
    const padded = '0'.repeat(Math.min(w.padding[i]!, 4 - digits.length)) + digits;
    return w.upper[i] ? padded.toUpperCase() : padded;
  });
  const dotted = w.dotted;
  const head = dotted ? hex.slice(0, 6) : hex;
  // One run of zero groups (any, not only the longest) may be written `::`.
  const runs: [number, number][] = [];
  for (let i = 0; i < head.length; i++) {
    if (address[i] !== 0) continue;
    for (let j = i + 1; j <= head.length && address[j - 1] === 0; j++) runs.push([i, j]);
  }
  const run =
    runs.length > 0 && w.compress % (runs.length + 1) !== 0
      ? runs[(w.compress % (runs.length + 1)) - 1]
      : undefined;
  let text = run
    ? `${head.slice(0, run[0]).join(':')}::${head.slice(run[1]).join(':')}`
    : head.join(':');
  if (dotted) {
    const tail = [address[6]! >> 8, address[6]! & 0xff, address[7]! >> 8, address[7]! & 0xff];
    text += `${text.endsWith(':') ? '' : ':'}${tail.join('.')}`;
  }
  return w.zone ? `${text}%eth0` : text;
}

describe('addressGroupOf, every way of writing one address', () => {
  it('gives every written form of an IPv6 address the same group', () => {
    fc.assert(
      fc.property(groups, writing, writing, (address, one, other) => {
        const a = written(address, one);
        const b = written(address, other);
        expect(isIP(a), a).toBe(6);
        expect(isIP(b), b).toBe(6);
        expect(addressGroupOf(a), `${a} and ${b}`).toBe(addressGroupOf(b));
      }),
      { numRuns: 2000 },
    );
  });

  it('gives an IPv4 address the group of each IPv6 form embedding it, however written', () => {
    const ipv4 = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 });
    fc.assert(
      fc.property(ipv4, writing, (octets, w) => {
        const low = [(octets[0]! << 8) | octets[1]!, (octets[2]! << 8) | octets[3]!];
        const embeddings = [
          [0, 0, 0, 0, 0, 0xffff, ...low],
          [0, 0, 0, 0, 0xffff, 0, ...low],
          [0x64, 0xff9b, 0, 0, 0, 0, ...low],
          // IPv4-compatible: only a unicast address, never one of 0.0.0.0/8 (:: and ::1 among them).
          ...(octets[0] === 0 ? [] : [[0, 0, 0, 0, 0, 0, ...low]]),
        ];
        for (const embedding of embeddings) {
          const text = written(embedding, w);
          expect(isIP(text), text).toBe(6);
          expect(addressGroupOf(text), text).toBe(octets.join('.'));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
