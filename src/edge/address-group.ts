import { isIP } from 'node:net';

/**
 * The client a per-address limit or count is kept for: an IPv4 address itself, an IPv6 one by
 * its /64 (`2001:db8:1:2::/64`), an IPv6 one that carries an IPv4 client (`embedsIPv4`) as that
 * IPv4 address; anything else as it is. One host is given a whole /64 (RFC 6177; SLAAC and
 * privacy addresses are made inside it), so it can take a new address for every request: keyed
 * by the full address, each would start a fresh limit, and the limit would be none.
 */
export function addressGroupOf(address: string): string {
  const family = isIP(address);
  if (family !== 6) return address;
  const groups = ipv6Groups(address);
  if (groups === undefined) return address;
  if (embedsIPv4(groups)) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${compressed(groups.slice(0, 4))}/64`;
}

/**
 * The /96 prefixes whose hosts are IPv4 clients, the address in the last 32 bits: IPv4-mapped
 * (`::ffff:0:0/96`, a dual-stack socket's IPv4 peer), IPv4-translated (`::ffff:0:0:0/96`, SIIT,
 * RFC 2765) and NAT64's well-known prefix (`64:ff9b::/96`, RFC 6052; a network-specific prefix
 * is the operator's choice, and may hold the address elsewhere: not read).
 */
const IPV4_PREFIXES = [
  [0, 0, 0, 0, 0, 0xffff],
  [0, 0, 0, 0, 0xffff, 0],
  [0x64, 0xff9b, 0, 0, 0, 0],
];

/**
 * Whether the address is an IPv4 client's: keyed by its /64 instead, every IPv4 client behind
 * one NAT64 would share one limit, and one of them could exhaust it for all. Also the deprecated
 * IPv4-compatible `::/96` (RFC 4291 2.5.5.1), which names a unicast IPv4 address only: never
 * one of 0.0.0.0/8, so `::` and `::1` (and `::2`...) stay IPv6.
 */
function embedsIPv4(groups: number[]): boolean {
  const prefix = groups.slice(0, 6);
  if (IPV4_PREFIXES.some((known) => known.every((g, i) => g === prefix[i]))) return true;
  return prefix.every((g) => g === 0) && groups[6]! >> 8 !== 0;
}

/** The eight 16-bit groups of an IPv6 address `isIP` accepts (a zone id, `%eth0`, ignored). */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.split('%')[0]!.toLowerCase();
  // A dotted IPv4 tail (`::ffff:1.2.3.4`) is the last two groups.
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
    text = `${dotted[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  const groups =
    halves.length === 2
      ? [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail]
      : head;
  return groups.length === 8 && groups.every((g) => g >= 0 && g <= 0xffff) ? groups : undefined;
}

/** The /64 prefix (its four groups) in the usual short form, ending in `::`. */
function compressed(prefix: number[]): string {
  // The network is the prefix followed by four zero groups: the trailing zero groups of the
  // prefix join them in the one `::` (2001:db8:: rather than 2001:db8:0:0::).
  let end = prefix.length;
  while (end > 0 && prefix[end - 1] === 0) end -= 1;
  return `${prefix
    .slice(0, end)
    .map((g) => g.toString(16))
    .join(':')}::`;
}
