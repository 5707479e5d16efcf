import { describe, expect, it } from 'vitest';
import { createOtpEnrollment, encodeBase32 } from '../../../src/cli/otp.ts';

describe('otp', () => {
  it.each([
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ])('encodes %j as RFC 4648 base32 %j without padding', (text, base32) => {
    expect(encodeBase32(Buffer.from(text))).toBe(base32);
  });

  it('encodes every bit', () => {
    expect(encodeBase32(Buffer.alloc(20, 0xff))).toBe('7'.repeat(32));
    expect(encodeBase32(Buffer.alloc(20))).toBe('A'.repeat(32));
  });

  it('generates a fresh 160-bit secret and its otpauth URI', () => {
    const first = createOtpEnrollment('alice@example.com');
    const second = createOtpEnrollment('alice@example.com');
    expect(first.secret).toMatch(/^[A-Z2-7]{32}$/); // 32 x 5 bits
    expect(second.secret).not.toBe(first.secret);
    expect(first.uri).toBe(
      `otpauth://totp/realmgate:alice%40example.com?secret=${first.secret}&issuer=realmgate`,
    );
  });
});
