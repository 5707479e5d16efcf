import { describe, expect, it } from 'vitest';
import { isHeaderSafe, principalFromClaims } from '../../../src/auth/principal.ts';

const base = { sub: '4f1c1a2e-0000-4000-8000-000000000001', iat: 1, exp: 2 };

describe('claims that become headers', () => {
  it.each(['ja', 'en', 'pt-BR', 'zh-Hant-TW', 'de-CH-1996'])(
    'keeps the language tag %s',
    (locale) => {
      expect(principalFromClaims('org', { ...base, locale }, 'bearer').locale).toBe(locale);
    },
  );

  it.each([
    'ja\r\nX-Injected: 1',
    'ja\u0000',
    'ja;q=1',
    '日本語',
    '',
    'a',
    'x'.repeat(36),
    'en_US',
    ' ja',
    'ja-',
    '-ja',
    'ja--JP',
    42,
    null,
    ['ja'],
    { toString: 'ja' },
    'ja\u00a0',
    'ja\u2028',
  ])('drops the locale %j for the default', (locale) => {
    expect(principalFromClaims('org', { ...base, locale }, 'bearer').locale).toBeUndefined();
  });

  it.each([
    ['4f1c1a2e-0000-4000-8000-000000000001', true],
    ['f:realm:user', true],
    ['', false],
    ['a b', false],
    ['a\r\nb', false],
    ['é', false],
    ['x'.repeat(256), false],
    [7, false],
  ])('header-safe %j: %s', (value, safe) => {
    expect(isHeaderSafe(value)).toBe(safe);
  });
});
