import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isFreeText, isOneLine, normalizeBase32Secret } from '../../../src/platform/user-input.ts';

/** Any UTF-16 code unit: lone surrogates and, by chance, valid pairs too. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code));
const special = fc.constantFrom(
  '\t',
  '\n',
  '\r',
  '\u0000',
  '\u007f',
  '\u0085',
  '\ud83d\ude00',
  '\u202e',
  '\u2067',
  '\u200f',
);
const text = fc.string({ unit: fc.oneof(codeUnit, special, fc.constantFrom('a', ' ')) });

// The rules as Unicode properties say them: the patterns (which the API description carries
// as they are) must mean exactly this.
// The directional marks (U+200E, U+200F, U+061C) are allowed: only the embeddings, overrides
// and isolates reorder text.
const unstorable = /[\p{Cc}\p{Cs}\u202A-\u202E\u2066-\u2069]/u;

describe('one line and free text', () => {
  it('one line: no control character (Cc), no lone surrogate (Cs), no directional override', () => {
    fc.assert(fc.property(text, (value) => isOneLine(value) === !unstorable.test(value)));
  });

  it('free text: the same, but tab, line feed and carriage return allowed', () => {
    fc.assert(
      fc.property(
        text,
        (value) => isFreeText(value) === !unstorable.test(value.replace(/[\t\n\r]/g, ' ')),
      ),
    );
  });
});

describe('normalizeBase32Secret', () => {
  const base32 = fc.string({
    unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz234567'),
    minLength: 20,
    maxLength: 300,
  });

  it('accepts what an app shows, spaced, dashed, padded, in either case', () => {
    expect(normalizeBase32Secret('jbsw y3dp-ehpk 3pxp jbsw y3dp ehpk 3pxp==')).toBe(
      'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP',
    );
  });

  it('keeps 26 to 256 base32 characters (at least 128 bits), refuses the rest', () => {
    fc.assert(
      fc.property(base32, fc.boolean(), (secret, spaced) => {
        const input = spaced ? secret.replace(/(.{4})/g, '$1 ') : secret;
        const ok = secret.length >= 26 && secret.length <= 256;
        if (ok) return normalizeBase32Secret(input) === secret.toUpperCase();
        return throws(() => normalizeBase32Secret(input));
      }),
    );
  });

  it('refuses other characters, `=` before the end and look-alike letters', () => {
    const secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    for (const bad of [`${secret}1`, `${secret}8`, `JB=${secret}`, `\u017f${secret}`, '']) {
      expect(
        throws(() => normalizeBase32Secret(bad)),
        bad,
      ).toBe(true);
    }
  });
});

function throws(run: () => unknown): boolean {
  try {
    run();
    return false;
  } catch {
    return true;
  }
}
