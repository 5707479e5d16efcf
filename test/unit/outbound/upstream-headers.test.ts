import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IncomingMessage } from 'node:http';
import {
  answerHeadersOf,
  answerRawHeaders,
  droppedRequestHeaderNames,
  IDENTITY_HEADERS,
  upstreamRequestHeaders,
} from '../../../src/outbound/upstream-headers.ts';

/** The identity headers as a CGI-style server reads them: `_` and `.` folded into `-`. */
const IDENTITY_FOLDED = Object.values(IDENTITY_HEADERS).map((name) => name.replace(/[_.]/g, '-'));

/** Each of `raw`'s headers reaches the upstream or not alike, whether credentials are kept or not. */
function expectEitherWay(raw: string[], forwarded: string[], droppedNames?: string[]): void {
  for (const keepCredentials of [false, true]) {
    expect(upstreamRequestHeaders(raw, { keepCredentials })).toEqual(forwarded);
    if (droppedNames) {
      expect(droppedRequestHeaderNames(raw, { keepCredentials })).toEqual(droppedNames);
    }
  }
}

const pairsOf = (flat: string[]) =>
  flat.flatMap((value, i) => (i % 2 === 0 ? [[value, flat[i + 1]!] as const] : []));

/** Every spelling a server might read as an identity header: case, `_` and `.` for `-`. */
const identitySpelling = fc
  .tuple(
    fc.constantFrom(...Object.values(IDENTITY_HEADERS)),
    fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
    fc.constantFrom('-', '_', '.'),
  )
  .map(([name, upper, separator]) =>
    [...name.replace(/[-_]/g, separator)].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join(''),
  );

const otherName = fc.constantFrom(
  'Accept',
  'Content-Type',
  'content-length',
  'X-Trace',
  'Authorization',
  'Cookie',
  'Connection',
  'Keep-Alive',
  'Transfer-Encoding',
  'Upgrade',
  'TE',
  'Trailer',
  'Proxy-Authorization',
  'Host',
  'Expect',
  'Forwarded',
  'X-Forwarded-For',
  'x-forwarded-host',
  'X-Forwarded-Proto',
  'X-Real-IP',
  'X-Request-Id',
  'x-request-id',
  'X-Custom',
  'x_custom',
  'Accept-Language',
  'User-Agent',
  'Proxy-Connection',
  'Proxy',
  'Proxy-Foo',
  'X-Forwarded-Ssl',
  'X-Forwarded-Scheme',
  'X-Forwarded-Server',
  'X-Forwarded-Client-Cert',
  'X-HTTP-Method-Override',
  'x-http-method',
  'X-Method-Override',
  'X-Original-URL',
  'x-rewrite-url',
);

const header = fc.tuple(fc.oneof(identitySpelling, otherName), fc.string({ maxLength: 10 }));

describe('upstreamRequestHeaders', () => {
  it('keeps ordinary headers in order and as received', () => {
    const raw = ['Accept', 'a/b', 'X-Trace', '1', 'x-trace', '2', 'Content-Length', '5'];
    expect(upstreamRequestHeaders(raw, { keepCredentials: false })).toEqual(raw);
  });

  it('drops identity headers in every spelling, underscores, hop-by-hop, forwarding claims', () => {
    const raw = [
      'user_id',
      'admin',
      'User.Id',
      'admin',
      'ORG-ROLES',
      'x',
      'organization_id',
      'o',
      'Organization-Id',
      'o',
      'Language',
      'en',
      'roles',
      'r',
      'X-Forwarded-For',
      '6.6.6.6',
      'Forwarded',
      'for=6.6.6.6',
      'Connection',
      'close, X-Secret',
      'X-Secret',
      's',
      'Expect',
      '100-continue',
      'Authorization',
      'Bearer t',
      'Cookie',
      'c=1',
      'DPoP',
      'eyJ.proof.sig',
      'Accept',
      '*/*',
    ];
    expect(upstreamRequestHeaders(raw, { keepCredentials: false })).toEqual(['Accept', '*/*']);
    expect(upstreamRequestHeaders(raw, { keepCredentials: true })).toEqual([
      'Authorization',
      'Bearer t',
      'Cookie',
      'c=1',
      'DPoP',
      'eyJ.proof.sig',
      'Accept',
      '*/*',
    ]);
  });

  it('drops every X-Forwarded-* and every Proxy and Proxy-* name, not only the common ones', () => {
    const raw = [
      'X-Forwarded-Ssl',
      'on',
      'x-forwarded-scheme',
      'https',
      'X-Forwarded-Protocol',
      'ssl',
      'X-Forwarded-Server',
      'evil.example',
      'X-Forwarded-Client-Cert',
      'Hash=0;Subject="CN=admin"',
      'X-Forwarded-Uri',
      '/api/platform/organizations',
      // httpoxy: CGI-style servers read it as HTTP_PROXY, the outbound proxy of the service.
      'Proxy',
      'http://evil.example:3128',
      'Proxy-Status',
      'x',
      'Accept',
      '*/*',
      'X-Forwardedness',
      'kept: not the X-Forwarded- family',
    ];
    expectEitherWay(raw, ['Accept', '*/*', 'X-Forwardedness', 'kept: not the X-Forwarded- family']);
  });

  it('drops every header a server or library reads as the client address, not only X-Real-IP', () => {
    // What request-ip (Node), Rails' Client-IP check, django-ipware and the usual PHP snippet
    // read before or beside X-Forwarded-For: a client's copy would name any address it likes.
    const claims = [
      'X-Client-IP',
      'Client-IP',
      'True-Client-IP',
      'CF-Connecting-IP',
      'CF-Connecting-IPv6',
      'CF-Pseudo-IPv4',
      'Fastly-Client-IP',
      'X-Cluster-Client-IP',
      'DO-Connecting-IP',
      'X-AppEngine-User-IP',
      'X-Originating-IP',
      'X-Remote-IP',
      'X-Remote-Addr',
      'X-Forwarded',
      'Forwarded-For',
      'X-Original-Forwarded-For',
      'X-Coming-From',
      'Coming-From',
    ];
    const raw = [...claims.flatMap((name) => [name, '6.6.6.6']), 'Accept', '*/*', 'X-Zip', 'z'];
    expectEitherWay(raw, ['Accept', '*/*', 'X-Zip', 'z']);
  });

  it("drops the client's X-Request-Id in any case: the gateway sends the id it answers with", () => {
    const raw = ['X-Request-Id', 'client-id', 'x-REQUEST-id', '<script>', 'Accept', '*/*'];
    expectEitherWay(raw, ['Accept', '*/*'], ['x-request-id', 'x-request-id']);
  });

  it("drops the client's baggage in every propagation format: services behind read it as the caller's context", () => {
    const raw = [
      'Baggage',
      'user.id=admin,tenant=other-org',
      'Correlation-Context',
      'role=admin',
      'jaeger-baggage',
      'tenant=other-org',
      'uberctx-tenant',
      'other-org',
      'OT-Baggage-User',
      'admin',
      'traceparent',
      '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      'Accept',
      '*/*',
    ];
    expectEitherWay(
      raw,
      ['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'Accept', '*/*'],
      ['baggage', 'correlation-context', 'jaeger-baggage', 'uberctx-tenant', 'ot-baggage-user'],
    );
  });

  it('lets nothing through that a server could read as identity, hop-by-hop or forwarding', () => {
    fc.assert(
      fc.property(fc.array(header, { maxLength: 12 }), fc.boolean(), (pairs, keepCredentials) => {
        const raw = pairs.flat();
        const kept = upstreamRequestHeaders(raw, { keepCredentials });
        const connectionNamed = pairs
          .filter(([name]) => name.toLowerCase() === 'connection')
          .flatMap(([, value]) => value.split(',').map((t) => t.trim().toLowerCase()));
        for (const [name] of pairsOf(kept)) {
          const lower = name.toLowerCase();
          expect(IDENTITY_FOLDED).not.toContain(lower.replace(/[_.]/g, '-'));
          expect(lower).not.toContain('_');
          expect(lower).not.toMatch(
            /^(connection|keep-alive|te|trailer|transfer-encoding|upgrade|host|expect|proxy|proxy-.*|forwarded|x-forwarded-.*|x-real-ip|x-request-id|x-http-method-override|x-http-method|x-method-override|x-original-url|x-rewrite-url)$/,
          );
          expect(connectionNamed).not.toContain(lower);
          if (!keepCredentials) expect(['authorization', 'cookie', 'dpop']).not.toContain(lower);
        }
        // What is kept is a subsequence of what came, pairs intact.
        const remaining = pairsOf(kept);
        for (const pair of pairs) {
          if (remaining[0]?.[0] === pair[0] && remaining[0][1] === pair[1]) remaining.shift();
        }
        expect(remaining).toEqual([]);
        // The proxy variant names exactly what the list variant leaves out.
        const dropped = droppedRequestHeaderNames(raw, { keepCredentials });
        expect(dropped.length + kept.length / 2).toBe(pairs.length);
      }),
      { numRuns: 3000 },
    );
  });
});

describe('answerHeadersOf', () => {
  it("passes an upstream's DPoP-Nonce and WWW-Authenticate back unchanged (RFC 9449 8, 9)", () => {
    const answer = {
      headers: {
        'dpop-nonce': 'n-1',
        'www-authenticate': 'DPoP error="use_dpop_nonce"',
        connection: 'close',
        'x-request-id': 'theirs',
      },
    } as unknown as IncomingMessage;
    expect(answerHeadersOf(answer)).toEqual({
      'dpop-nonce': 'n-1',
      'www-authenticate': 'DPoP error="use_dpop_nonce"',
    });
  });
});

describe("an upstream's Connection", () => {
  it('drops the headers it names from the answer, by raw list and by name (RFC 9110 7.6.1)', () => {
    const raw = [
      'Content-Type',
      'application/json',
      'Connection',
      'keep-alive, X-Upstream-Secret',
      'x-upstream-secret',
      'internal',
      'CONNECTION',
      'X-Other',
      'X-Other',
      'o',
      'X-Kept',
      'k',
    ];
    expect(answerRawHeaders(raw)).toEqual(['Content-Type', 'application/json', 'X-Kept', 'k']);
    expect(answerRawHeaders(raw.map((item) => Buffer.from(item, 'latin1')))).toEqual([
      'Content-Type',
      'application/json',
      'X-Kept',
      'k',
    ]);
    const answer = {
      headers: {
        'content-type': 'application/json',
        connection: 'close, X-Upstream-Secret',
        'x-upstream-secret': 'internal',
        'x-kept': 'k',
      },
    } as unknown as IncomingMessage;
    expect(answerHeadersOf(answer)).toEqual({ 'content-type': 'application/json', 'x-kept': 'k' });
  });
});
