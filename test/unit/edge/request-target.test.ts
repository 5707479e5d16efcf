import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseRequestTarget, type RequestTarget } from '../../../src/edge/request-target.ts';

const accepted = (url: string): RequestTarget => {
  const target = parseRequestTarget(url);
  if ('refused' in target) throw new Error(`refused: ${url}`);
  return target;
};

/** Ways to write a path that some peer could read as another path. */
const AMBIGUOUS = [
  '/api/o/workspaces/a/ita/../../b/ita/x',
  '/api/o/workspaces/a/ita/%2e%2e/%2e%2e/b/ita/x',
  '/api/o/workspaces/a/ita/%2E%2E/%2E%2E/b/ita/x',
  '/api/o/workspaces/a/ita/.%2e/x',
  '/api/o/workspaces/a/ita/%2e./x',
  '/api/o/workspaces/a/./ita/x',
  '/api/o/workspaces/a/%2e/ita/x',
  '/api/o/workspaces/a/ita/..',
  '/api/o/workspaces/a/ita/.',
  '/api/o/workspaces/a%2f..%2fb/ita/x',
  '/api/o/workspaces/a%2F..%2Fb/ita/x',
  '/api/o/workspaces/a%5c..%5cb/ita/x',
  '/api/o/workspaces/a\\..\\b/ita/x',
  '/api/o//workspaces/a/ita/x',
  '//api/o/workspaces/a/ita/x',
  '/api/o/workspaces/a;x/ita/x',
  '/api/o/workspaces/a%3bx/ita/x',
  '/auth/admin;x/master/console/',
  '/auth/admin%3B/master/console/',
  '/api/o/workspaces/x%00/ita/x',
  '/api/o/workspaces/x%0a/ita/x',
  '/api/o/workspaces/x%0D%0Ay/ita/x',
  '/api/o/workspaces/x%7f/ita/x',
  '/api/o/workspaces/x%c2%85/ita/x',
  '/api/o/workspaces/x%/ita/x',
  '/api/o/workspaces/x%2/ita/x',
  '/api/o/workspaces/x%zz/ita/x',
  '/api/o/workspaces/x%c3/ita/x',
  '/api/o/workspaces/x%ff/ita/x',
  '/api/o/workspaces/x%ed%a0%80/ita/x',
  '/api/o/workspaces/x%c0%ae%c0%ae/ita/x',
  '/api/o/workspaces/%252e%252e/ita/x',
  '/api/o/workspaces/a/ita/x#frag',
  '/api/o/workspaces/a b/ita/x',
  '/api/o/workspaces/é/ita/x',
  '/api/o/workspaces/a"b/ita/x',
  '/api/o/workspaces/a<b>/ita/x',
  '/api/o/workspaces/a|b/ita/x',
  '/api/o/workspaces/a{b}/ita/x',
  '/api/o/workspaces/a^b/ita/x',
  '/api/o/workspaces/a`b/ita/x',
  'http://evil.example/api/platform/organizations',
  '*',
  '',
  'api/platform/organizations',
];

/** No separator, `;`, `%` or control character (C0, DEL, C1). */
function isOrdinary(segment: string): boolean {
  return [...segment].every((c) => {
    const code = c.charCodeAt(0);
    return !'/\\;%'.includes(c) && code >= 0x20 && (code < 0x7f || code > 0x9f);
  });
}

describe('parseRequestTarget', () => {
  it.each(AMBIGUOUS)('refuses %s', (url) => {
    expect(parseRequestTarget(url)).toEqual({ refused: expect.any(String) as unknown });
  });

  it('keeps a plain path as it is, with its query and a trailing slash', () => {
    expect(accepted('/api/o/workspaces/ws1/ita/menu/operation_list/filter/?a=1&b=%00')).toEqual({
      path: '/api/o/workspaces/ws1/ita/menu/operation_list/filter/',
      query: '?a=1&b=%00',
      segments: ['api', 'o', 'workspaces', 'ws1', 'ita', 'menu', 'operation_list', 'filter', ''],
    });
    expect(accepted('/').segments).toEqual(['']);
  });

  it('decodes segments once and forwards one spelling of them', () => {
    const target = accepted('/api/o/workspaces/%77s1/ita/caf%c3%a9/a%20b/%7E~');
    expect(target.segments).toEqual(['api', 'o', 'workspaces', 'ws1', 'ita', 'café', 'a b', '~~']);
    expect(target.path).toBe('/api/o/workspaces/ws1/ita/caf%C3%A9/a%20b/~~');
  });

  it('leaves the query alone: it is not part of the path', () => {
    expect(accepted('/healthz?x=../..;%2f').query).toBe('?x=../..;%2f');
  });

  it('never throws, whatever the target', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 80 }), (url) => {
        parseRequestTarget(url);
      }),
    );
  });

  /** Paths built from the pieces that make paths ambiguous. */
  const tricky = fc
    .array(
      fc.constantFrom(
        '/',
        '.',
        '..',
        '%2e',
        '%2E',
        '%2f',
        '%5C',
        '%00',
        '%3b',
        ';',
        'a',
        'ws1',
        '%',
        '%zz',
        '%c3%a9',
        '%c3',
        '\\',
        '%25',
        'é',
        '%41',
        '~',
        '?',
        '/..',
        '/.',
      ),
      { maxLength: 12 },
    )
    .map((parts) => `/${parts.join('')}`);

  it('accepts only paths whose segments mean one thing, and its path means the same again', () => {
    fc.assert(
      fc.property(tricky, (url) => {
        const target = parseRequestTarget(url);
        if ('refused' in target) return;
        const last = target.segments.length - 1;
        target.segments.forEach((segment, i) => {
          expect(segment === '.' || segment === '..').toBe(false);
          if (i < last) expect(segment).not.toBe('');
          expect(isOrdinary(segment)).toBe(true);
        });
        // The forwarded spelling is canonical: parsing it again changes nothing.
        expect(accepted(target.path + target.query)).toEqual(target);
      }),
      { numRuns: 2000 },
    );
  });

  it('accepts any path of ordinary segments and gives them back decoded', () => {
    const segment = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 12 })
      .filter((s) => s !== '.' && s !== '..' && isOrdinary(s));
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 6 }), (segments) => {
        const target = accepted(`/${segments.map(encodeURIComponent).join('/')}`);
        expect(target.segments).toEqual(segments);
      }),
      { numRuns: 1000 },
    );
  });
});
