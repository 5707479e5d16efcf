import { parseRequestTarget } from '../../edge/request-target.ts';

/**
 * The form a DPoP proof's `htu` is compared in (RFC 9449 section 4.3, step 9): the URL without
 * query and fragment, after RFC 3986's syntax- and scheme-based normalisation. WHATWG URL
 * parsing lowercases scheme and host, drops a default port and resolves dot segments; the path
 * then takes the one spelling the edge gives every request path (`parseRequestTarget`:
 * unreserved characters decoded, other escapes in upper case), so a client's `%7e` and `~`
 * compare equal and an ambiguous path never does. Undefined when `url` is not an absolute
 * http(s) URL or its path is one the edge would refuse.
 */
export function normalizedHtu(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return undefined;
  if (parsed.username !== '' || parsed.password !== '') return undefined;
  const target = parseRequestTarget(parsed.pathname);
  if ('refused' in target) return undefined;
  return `${parsed.protocol}//${parsed.host}${target.path}`;
}

/**
 * The base every `/api` request's `htu` starts with: `PUBLIC_URL` normalised as a proof's `htu`
 * is, without its trailing slash, so that base + the request's path (as the edge read it) is
 * the URL the client addressed.
 */
export function htuBaseOf(publicUrl: string): string {
  const base = normalizedHtu(publicUrl);
  if (base === undefined) throw new Error(`PUBLIC_URL is not an http(s) URL: ${publicUrl}`);
  return base.endsWith('/') ? base.slice(0, -1) : base;
}
