import { isIP } from 'node:net';

/**
 * The client a per-address limit or count is kept for: an IPv4 address itself, an IPv6 one by
 * its /64 (`2001:db8:1:2::/64`), an IPv4-mapped IPv6 one (`::ffff:192.0.2.7`, however written)
 * as its IPv4 address; anything else as it is. One host is given a whole /64 (RFC 6177; SLAAC
 * and privacy addresses are made inside it), so it can take a new address for every request:
 * keyed by the full address, each would start a fresh login-throttle window or refusal
 * summary, and the limit would be none.
 */
export function addressGroupOf(address: string): string {
  const family = isIP(address);
  if (family !== 6) return address;
  const groups = ipv6Groups(address);
  if (groups === undefined) return address;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${compressed(groups.slice(0, 4))}/64`;
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
