/** A request target that passed `parseRequestTarget`: one meaning, whoever reads it. */
export interface RequestTarget {
  /** The path as it is routed and forwarded: the client's, re-encoded where it was encoded. */
  path: string;
  /** `?` and what follows, or ''. Not interpreted here; it travels as the client sent it. */
  query: string;
  /** The path's segments, percent-decoded; a trailing slash gives a last empty segment. */
  segments: string[];
}

/** Why a request target was refused; the text is safe to show the client. */
export interface RefusedTarget {
  refused: string;
}

/**
 * Bytes allowed raw in a path: RFC 3986 `pchar` and `/`, without `;` (servlet containers and
 * some proxies read it as a parameter separator, so `admin;x` is not `admin` to everyone).
 */
const PATH_BYTE = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,=:@/%") {
  PATH_BYTE[c.charCodeAt(0)] = 1;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const HEX_BYTE = /^[0-9A-Fa-f]{2}$/;

/**
 * Decides what a request target means before anything routes on it, so the express routes, the
 * forwarder and the `/auth` proxy can never read one path two ways. Refused:
 * - anything but an origin-form target (`/path?query`): no `*`, no absolute URL;
 * - a raw byte outside RFC 3986's path characters, and `;` anywhere (raw or encoded);
 * - a broken percent-escape, invalid UTF-8 once decoded, a decoded control character;
 * - an encoded `/`, `\` or `%` (a peer that decodes twice would see a path nobody checked);
 * - a `.` or `..` segment however it is written, and an empty segment (`//`) but the last.
 */
export function parseRequestTarget(url: string | undefined): RequestTarget | RefusedTarget {
  if (!url || url.charCodeAt(0) !== 0x2f) return { refused: 'Request target must be a path.' };
  const queryAt = url.indexOf('?');
  const rawPath = queryAt < 0 ? url : url.slice(0, queryAt);
  let encoded = false;
  for (let i = 0; i < rawPath.length; i++) {
    const code = rawPath.charCodeAt(i);
    if (code >= 128 || PATH_BYTE[code] !== 1) return refusedPath();
    if (code === 0x25) encoded = true;
  }
  const rawSegments = rawPath.slice(1).split('/');
  const segments = encoded ? decodeSegments(rawSegments) : rawSegments;
  if (!segments) return refusedPath();
  const last = segments.length - 1;
  for (let i = 0; i <= last; i++) {
    const segment = segments[i]!;
    if ((segment === '' && i < last) || segment === '.' || segment === '..') return refusedPath();
  }
  return {
    path: encoded ? `/${segments.map(encodeSegment).join('/')}` : rawPath,
    query: queryAt < 0 ? '' : url.slice(queryAt),
    segments,
  };
}

function refusedPath(): RefusedTarget {
  return { refused: 'Malformed or ambiguous request path.' };
}

function decodeSegments(rawSegments: string[]): string[] | undefined {
  const segments: string[] = [];
  for (const raw of rawSegments) {
    const segment = raw.includes('%') ? decodeSegment(raw) : raw;
    if (segment === undefined) return undefined;
    segments.push(segment);
  }
  return segments;
}

function decodeSegment(raw: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    if (code !== 0x25) {
      bytes.push(code);
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!HEX_BYTE.test(hex)) return undefined;
    bytes.push(Number.parseInt(hex, 16));
    i += 2;
  }
  let decoded: string;
  try {
    decoded = utf8.decode(Uint8Array.from(bytes));
  } catch {
    return undefined;
  }
  for (let i = 0; i < decoded.length; i++) {
    const code = decoded.charCodeAt(i);
    // Control characters (C0, DEL, C1) and the separators that must not arrive encoded.
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) return undefined;
    if (code === 0x2f || code === 0x5c || code === 0x25 || code === 0x3b) return undefined;
  }
  return decoded;
}

/** The one spelling of a decoded segment: RFC 3986 path characters raw, the rest escaped. */
export function encodeSegment(segment: string): string {
  let plain = true;
  for (let i = 0; i < segment.length && plain; i++) {
    const code = segment.charCodeAt(i);
    plain = code < 128 && PATH_BYTE[code] === 1 && code !== 0x25;
  }
  if (plain) return segment;
  return Array.from(Buffer.from(segment, 'utf8'), (byte) =>
    byte < 128 && PATH_BYTE[byte] === 1 && byte !== 0x25 && byte !== 0x2f
      ? String.fromCharCode(byte)
      : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`,
  ).join('');
}
