import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { base32OfOtpSecret, otpauthUri } from '../../../src/demo/totp.ts';
import { keycloakAuthenticator } from '../../helpers/totp.ts';

// The demo prints what otplib (a test-only dependency) would: the same secret, the same URI.
describe('demo OTP secret and URI', () => {
  const secrets = ['a', 'ab', 'abcde', 'J7k2QzLm9PxR4tVw8YbN', ...randomSecrets(20)];

  it('encode a raw Keycloak secret as otplib does', () => {
    for (const secret of secrets) {
      expect(base32OfOtpSecret(secret)).toBe(keycloakAuthenticator.encode(secret));
    }
  });

  it('build the otpauth URI as otplib does', () => {
    for (const secret of secrets) {
      const base32 = keycloakAuthenticator.encode(secret);
      expect(otpauthUri(secret, 'demo-otp', 'realmgate demo')).toBe(
        keycloakAuthenticator.keyuri('demo-otp', 'realmgate demo', base32),
      );
    }
  });
});

function randomSecrets(count: number): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from({ length: count }, (_, i) =>
    Array.from(randomBytes(1 + i), (b) => alphabet[b % alphabet.length]).join(''),
  );
}
