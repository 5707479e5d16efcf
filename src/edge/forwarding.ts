import type { IncomingMessage } from 'node:http';
import { isIP, type BlockList } from 'node:net';

/**
 * Who the client is and what it asked for, as the gateway vouches for it: its address, and the
 * values of `X-Forwarded-For`, `-Proto` and `-Host` (which outbound/forwarded-headers.ts writes
 * toward a service). A client's own values are believed only when the connection comes from a
 * trusted proxy (`TRUSTED_PROXIES`); otherwise the gateway says what it saw itself.
 */
export interface Forwarding {
  /**
   * The client's address: the peer, or behind trusted proxies the right-most address of the
   * chain they vouch for that is not itself trusted, else the last one they vouch for.
   */
  clientAddress(req: IncomingMessage): string;
  /** What the gateway vouches for, by name. */
  forwarded(req: IncomingMessage): Forwarded;
}

/** The values of `X-Forwarded-For`, `-Proto` and `-Host` the gateway sends on. */
export interface Forwarded {
  /** The chain of addresses: a trusted proxy's `X-Forwarded-For`, then the peer. */
  for: string;
  proto: string;
  host: string;
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) is `10.0.0.1`. */
function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * An address of an `X-Forwarded-For` chain as proxies write it: bare, IPv6 in brackets, or with
 * the client's port (`198.51.100.7:50123`, `[2001:db8::7]:50123`: Azure Application Gateway by
 * default, IIS ARR). '' when it is none of these.
 */
function chainAddress(entry: string): string {
  if (isIP(entry) !== 0) return plainAddress(entry);
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/.exec(entry);
  if (v6) return isIP(v6[1]!) === 6 ? plainAddress(v6[1]!) : '';
  const v4 = /^([\d.]+):\d{1,5}$/.exec(entry);
  return v4 && isIP(v4[1]!) === 4 ? v4[1]! : '';
}

/** The gateway's forwarding rules; `trusted`: the proxies of `TRUSTED_PROXIES`, if any. */
export function createForwarding(trusted: BlockList | undefined): Forwarding {
  const isTrusted = (address: string): boolean => {
    if (trusted === undefined) return false;
    const family = isIP(address);
    return family !== 0 && trusted.check(address, family === 6 ? 'ipv6' : 'ipv4');
  };
  const peerOf = (req: IncomingMessage) => plainAddress(req.socket.remoteAddress ?? '');
  const single = (value: string | string[] | undefined) =>
    Array.isArray(value) ? value[0] : value;
  const forwarded = (req: IncomingMessage): Forwarded => {
    const peer = peerOf(req);
    const viaProxy = isTrusted(peer);
    const seenProto = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
    const priorFor = viaProxy ? single(req.headers['x-forwarded-for']) : undefined;
    const proto = (viaProxy && single(req.headers['x-forwarded-proto'])) || seenProto;
    const host = (viaProxy && single(req.headers['x-forwarded-host'])) || req.headers.host || '';
    return { for: priorFor ? `${priorFor}, ${peer}` : peer, proto, host };
  };

  return {
    clientAddress(req) {
      const peer = peerOf(req);
      if (!isTrusted(peer)) return peer;
      // Right to left: each trusted proxy vouches for the address before it. A chain trusted to
      // its start names a client inside the trusted range: the last address vouched for, never
      // the proxy that vouched (all the clients behind it would share its address).
      const chain = String(req.headers['x-forwarded-for'] ?? '').split(',');
      let vouched = peer;
      for (let i = chain.length - 1; i >= 0; i--) {
        const address = chainAddress(chain[i]!.trim());
        if (isIP(address) === 0) break;
        if (!isTrusted(address)) return address;
        vouched = address;
      }
      return vouched;
    },
    forwarded,
  };
}
