import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBasicCredentials } from '../../../../src/auth/basic/parse-basic.ts';

const encode = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('parseBasicCredentials', () => {
  it.each([
    ['', 'missing'],
    ['!!!!', 'base64'],
    ['YWJj', 'user:password'],
    [encode(':pw'), 'user name and a password'],
    [encode('user:'), 'user name and a password'],
    [encode('us\u0000er:pw'), 'Malformed'],
    [Buffer.from([0x61, 0x3a, 0xff]).toString('base64'), 'UTF-8'],
    ['YQ', 'base64'],
    ['A'.repeat(5000), 'Malformed'],
  ])('refuses %j with a reason', (value, reason) => {
    const parsed = parseBasicCredentials(value);
    expect(parsed).toEqual({ invalid: expect.stringContaining(reason) as unknown });
  });

  it('splits at the first colon, so passwords may hold colons', () => {
    expect(parseBasicCredentials(encode('alice:pa:ss'))).toEqual({
      username: 'alice',
      password: 'pa:ss',
    });
  });

  it('gives back any user name and password it was given', () => {
    const username = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
      .filter(
        (s) =>
          !s.includes(':') &&
          ![...s].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f),
      );
    const password = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 });
    fc.assert(
      fc.property(username, password, (user, pass) => {
        fc.pre(encode(`${user}:${pass}`).length <= 4096);
        expect(parseBasicCredentials(encode(`${user}:${pass}`))).toEqual({
          username: user,
          password: pass,
        });
      }),
      { numRuns: 2000 },
    );
  });

  it('never throws, and never accepts what does not decode to user:password', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: 'binary', maxLength: 200 }),
          fc.uint8Array({ maxLength: 120 }).map((b) => Buffer.from(b).toString('base64')),
        ),
        (value) => {
          const parsed = parseBasicCredentials(value);
          if ('invalid' in parsed) return;
          expect(parsed.username.length).toBeGreaterThan(0);
          expect(parsed.password.length).toBeGreaterThan(0);
          expect(parsed.username).not.toContain(':');
          expect(encode(`${parsed.username}:${parsed.password}`)).toBe(value.trim());
        },
      ),
      { numRuns: 3000 },
    );
  });
});
