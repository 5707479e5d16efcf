import { BlockList, isIP } from 'node:net';

/**
 * Parses `TRUSTED_PROXIES`: comma-separated IPv4/IPv6 addresses or CIDR ranges. Throws a
 * message naming the first entry that is neither.
 */
export function parseTrustedProxies(list: string): BlockList {
  const trusted = new BlockList();
  for (const entry of list.split(',').map((item) => item.trim())) {
    if (entry === '') continue;
    const [address = '', prefix, extra] = entry.split('/');
    const family = isIP(address);
    const bits = prefix === undefined ? undefined : Number(prefix);
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      extra !== undefined ||
      (bits !== undefined && (!/^\d{1,3}$/.test(prefix!) || bits > maxBits))
    ) {
      throw new Error(`not an IP address or CIDR range: ${JSON.stringify(entry)}`);
    }
    const type = family === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) trusted.addAddress(address, type);
    else trusted.addSubnet(address, bits, type);
  }
  return trusted;
}
