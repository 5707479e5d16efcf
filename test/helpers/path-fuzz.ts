import fc from 'fast-check';

/**
 * One of `words`, mostly as written, sometimes in other cases: path segments that a route
 * table either names exactly or must not name (a path reader that ignored case would serve the
 * variants).
 */
export function keywordOf(words: readonly string[]): fc.Arbitrary<string> {
  return fc
    .tuple(fc.constantFrom(...words), fc.array(fc.boolean(), { maxLength: 16 }), fc.nat(3))
    .map(([word, upper, often]) =>
      often === 0 ? [...word].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('') : word,
    );
}
