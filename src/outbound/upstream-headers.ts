import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/*
 * The one table of headers the gateway treats specially between a client and an upstream (the
 * automation service, Keycloak), by group, as both proxies apply it (outbound/forward.ts).
 */

/**
 * The gateway's own identity headers, spelled as the automation service reads them (the suite's
 * contract: `organization_id` with an underscore, the others with `-`). A service behind the
 * gateway believes them, so a client's copy never passes, however it is spelled (see
 * `isIdentityName`).
 */
export const IDENTITY_HEADERS = {
  userId: 'user-id',
  roles: 'roles',
  orgRoles: 'org-roles',
  language: 'language',
  organizationId: 'organization_id',
} as const;

/** A header name as CGI-style servers read it: `_` and `.` folded into `-`. */
const folded = (lowerName: string) => lowerName.replace(/[_.]/g, '-');
const IDENTITY = new Set(Object.values(IDENTITY_HEADERS).map(folded));

/**
 * Connection-level headers (RFC 9110 7.6.1 and the usual non-standard ones): never relayed, in
 * either direction.
 */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Request headers the gateway answers or sets itself: `Host` (the upstream's), `Expect` (the
 * gateway answered the client's expectation; the body it forwards is already coming).
 */
const SET_BY_GATEWAY = new Set(['host', 'expect']);

/**
 * Claims only the gateway may make: about the client (see forwarded-headers.ts), and the request
 * id, which the gateway sends as the client got it back (a malformed one of the client's is
 * replaced, and must not travel on beside it). With them every name of the `X-Forwarded-`
 * family (`isForwardingClaim`), not only those the gateway sets: servers read many more
 * (`-Ssl`, `-Scheme`, `-Protocol` for the scheme, `-Client-Cert` for a client certificate,
 * `-Uri`, `-Server`), and a client's copy would speak for the gateway; and every other header
 * a server reads as the client's address (`X-Real-IP`, `X-Client-IP`, `True-Client-IP`, ...).
 */
const FORWARDING = new Set([
  'x-request-id',
  'forwarded',
  // What servers and libraries read as the client's address before or beside X-Forwarded-For
  // (request-ip reads X-Client-IP first, Rails compares Client-IP with it, django-ipware and
  // PHP's usual snippet read X-Forwarded, Forwarded-For, X-Coming-From): only the gateway's
  // `X-Forwarded-For` names the client. Every name ending in `-IP` is one too (`isForwardingClaim`).
  'x-forwarded',
  'forwarded-for',
  'x-original-forwarded-for',
  'x-remote-addr',
  'x-coming-from',
  'coming-from',
]);
const FORWARDING_FAMILY = 'x-forwarded-';
/** `X-Real-IP`, `X-Client-IP`, `True-Client-IP`, `CF-Connecting-IP(v6)`, `CF-Pseudo-IPv4`, ... */
const ADDRESS_SUFFIXES = ['-ip', '-ipv4', '-ipv6'];

/**
 * Headers some frameworks read as the request's real method or target (express's
 * method-override, OData's `X-HTTP-Method`, IIS and Symfony's `X-Original-URL`): the gateway
 * admits a request by its method and path (a read-only token may GET, never DELETE), so the
 * upstream must act on that method and path alone.
 */
const REQUEST_LINE_CLAIMS = new Set([
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  'x-original-url',
  'x-rewrite-url',
]);

/**
 * `Proxy` and the `Proxy-` family (`Proxy-Authorization`, `-Connection`, any other): a
 * proxy's business, never the upstream's; `Proxy` itself is read as `HTTP_PROXY` by CGI-style
 * servers, the service's own outbound proxy (httpoxy).
 */
const PROXY_FAMILY = 'proxy';

/** Whether a lowercase name is a forwarding claim or of the `Proxy` family. */
const isForwardingClaim = (name: string): boolean =>
  FORWARDING.has(name) ||
  name.startsWith(FORWARDING_FAMILY) ||
  ADDRESS_SUFFIXES.some((suffix) => name.endsWith(suffix)) ||
  (name.startsWith(PROXY_FAMILY) &&
    (name.length === PROXY_FAMILY.length || name.charCodeAt(PROXY_FAMILY.length) === 0x2d));

/**
 * Baggage: application context a service behind reads as the caller's (a tenant, a user, a
 * feature flag), in W3C `Baggage` and the older formats (`Correlation-Context`, Jaeger's
 * `jaeger-baggage` and `uberctx-*`, OpenTracing's `ot-baggage-*`). A client's baggage is its
 * own claim: the gateway is the trust boundary and starts none, so none passes. Trace context
 * (`traceparent`, `tracestate`) only names a trace, and passes (outbound/forward.ts).
 */
const BAGGAGE = new Set(['baggage', 'correlation-context', 'jaeger-baggage']);
const isBaggage = (name: string): boolean =>
  BAGGAGE.has(name) || name.startsWith('uberctx-') || name.startsWith('ot-baggage-');

/**
 * The client's credentials: they stay at the gateway unless the service needs them (Keycloak).
 * `DPoP` is one: a proof of possession for this request (RFC 9449), checked by the gateway on
 * `/api` and by Keycloak on its token endpoint.
 */
const CREDENTIALS = new Set(['authorization', 'cookie', 'dpop']);

/**
 * Whether a header name reads as one of the gateway's identity headers to some server: WSGI and
 * CGI turn `-` into `_`, and some frameworks fold `.` too.
 */
function isIdentityName(lowerName: string): boolean {
  return IDENTITY.has(
    lowerName.includes('_') || lowerName.includes('.') ? folded(lowerName) : lowerName,
  );
}

/**
 * The client's request headers that may travel on, from `rawHeaders` (`[name, value, ...]`),
 * in order and as received. Dropped: identity headers in any spelling, every name with `_`
 * (nginx's `underscores_in_headers off`: such names are ambiguous behind CGI-style servers),
 * hop-by-hop headers and those the client's `Connection` names, forwarding claims (every
 * `X-Forwarded-*`, `Forwarded`, every `*-IP` such as `X-Real-IP` and `X-Client-IP`, the other
 * client-address claims), `Proxy` and every `Proxy-*`, method and target
 * overrides (`X-HTTP-Method-Override`, `X-Original-URL`, ...), baggage (`Baggage` and its
 * older formats), and
 * `X-Request-Id` (the gateway sets its own), and
 * (unless `keepCredentials`) `Authorization`, `Cookie` and `DPoP`; and the lowercase names of
 * `replaced`, which the caller sets itself for this request (outbound/forward.ts).
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  options: { keepCredentials: boolean; replaced?: ReadonlySet<string> },
): string[] {
  const dropped = droppedBy(rawHeaders, options.keepCredentials);
  const replaced = options.replaced;
  const kept: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!dropped(name) && replaced?.has(name) !== true)
      kept.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return kept;
}

/** The lowercase names `upstreamRequestHeaders` drops, for a proxy that copies all by default. */
export function droppedRequestHeaderNames(
  rawHeaders: readonly string[],
  options: { keepCredentials: boolean },
): string[] {
  const dropped = droppedBy(rawHeaders, options.keepCredentials);
  const names: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (dropped(name)) names.push(name);
  }
  return names;
}

function droppedBy(rawHeaders: readonly string[], keepCredentials: boolean) {
  let connection: string[] | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() === 'connection') (connection ??= []).push(rawHeaders[i + 1]!);
  }
  const named = connection && connectionNamedIn(connection);
  return (name: string): boolean =>
    HOP_BY_HOP.has(name) ||
    SET_BY_GATEWAY.has(name) ||
    isForwardingClaim(name) ||
    REQUEST_LINE_CLAIMS.has(name) ||
    isBaggage(name) ||
    name.includes('_') ||
    isIdentityName(name) ||
    named?.has(name) === true ||
    (!keepCredentials && CREDENTIALS.has(name));
}

/**
 * Whether an upstream's answer header goes to the client: all but those of the connection (and
 * those its `Connection` names: `connectionNamedIn`) and the upstream's `X-Request-Id` (the
 * client gets the gateway's, whatever a front of the upstream adds).
 */
const passesBack = (lowerName: string) =>
  !HOP_BY_HOP.has(lowerName) && lowerName !== 'x-request-id';

/**
 * The names a `Connection` header lists (`values`: its values), but `close` and `keep-alive`:
 * headers about that hop's connection (RFC 9110 7.6.1), never relayed, in either direction.
 * Undefined when it names none, as nearly always.
 */
function connectionNamedIn(values: readonly string[]): Set<string> | undefined {
  let named: Set<string> | undefined;
  for (const value of values) {
    // What nearly every answer says, read without splitting it.
    if (value === 'keep-alive' || value === 'close') continue;
    for (const token of value.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== 'close' && name !== 'keep-alive' && name !== '') (named ??= new Set()).add(name);
    }
  }
  return named;
}

/** An upstream's answer headers a client may get (`passesBack`), by name: for a step that edits them. */
export function answerHeadersOf(answer: { headers: IncomingHttpHeaders }): OutgoingHttpHeaders {
  const connection = answer.headers.connection;
  const named =
    connection === undefined
      ? undefined
      : connectionNamedIn(Array.isArray(connection) ? connection : [connection]);
  const headers: OutgoingHttpHeaders = {};
  for (const name in answer.headers) {
    if (passesBack(name) && named?.has(name) !== true) headers[name] = answer.headers[name];
  }
  return headers;
}

/**
 * The same headers (`passesBack`) as `[name, value, ...]` from the answer's `rawHeaders`, in
 * order and as received: what a relayed answer is written with, with no object of the headers
 * built on either side (Node writes such a list as it is).
 */
export function answerRawHeadersOf(answer: { rawHeaders: readonly string[] }): string[] {
  return answerRawHeaders(answer.rawHeaders);
}

/**
 * The same from a `[name, value, ...]` list as undici hands it over (bytes), each read as Latin-1
 * as Node reads them and writes them back: the bytes go on unchanged.
 */
export function answerRawHeaders(raw: readonly (string | Buffer)[]): string[] {
  const kept: string[] = [];
  let connection: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = latin1(raw[i]!);
    const lower = name.toLowerCase();
    if (passesBack(lower)) kept.push(name, latin1(raw[i + 1]!));
    else if (lower === 'connection') (connection ??= []).push(latin1(raw[i + 1]!));
  }
  // One pass for every answer; a second only for the rare one whose Connection names a header.
  const named = connection && connectionNamedIn(connection);
  if (named === undefined) return kept;
  const unnamed: string[] = [];
  for (let i = 0; i < kept.length; i += 2) {
    if (!named.has(kept[i]!.toLowerCase())) unnamed.push(kept[i]!, kept[i + 1]!);
  }
  return unnamed;
}

const latin1 = (value: string | Buffer) =>
  typeof value === 'string' ? value : value.toString('latin1');
