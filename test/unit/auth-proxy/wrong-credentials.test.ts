import { describe, expect, it } from 'vitest';
import { credentialsRefusalStatus } from '../../../src/auth-proxy/wrong-credentials.ts';

const body = (value: unknown) => Buffer.from(JSON.stringify(value));

describe("the status of Keycloak's answer to a password grant", () => {
  it('is 401 for wrong credentials (invalid_grant "Invalid user credentials")', () => {
    const answer = body({ error: 'invalid_grant', error_description: 'Invalid user credentials' });
    expect(credentialsRefusalStatus(400, answer)).toBe(401);
  });

  it("is Keycloak's own for every other refusal or error", () => {
    for (const [error, description] of [
      ['invalid_grant', 'Account disabled'],
      ['invalid_grant', 'Account is not fully set up'],
      ['invalid_grant', 'invalid user credentials'],
      ['invalid_request', 'Invalid user credentials'],
      ['unauthorized_client', 'Client not allowed for direct access grants'],
    ]) {
      expect(credentialsRefusalStatus(400, body({ error, error_description: description }))).toBe(
        400,
      );
    }
    expect(credentialsRefusalStatus(400, body({ error: 'invalid_grant' }))).toBe(400);
  });

  it('is unchanged for an answer that is not a JSON object, or not a 400', () => {
    for (const text of ['', 'not json', 'null', '[]', '"Invalid user credentials"']) {
      expect(credentialsRefusalStatus(400, Buffer.from(text))).toBe(400);
    }
    const refusal = body({ error: 'invalid_grant', error_description: 'Invalid user credentials' });
    for (const status of [200, 401, 500])
      expect(credentialsRefusalStatus(status, refusal)).toBe(status);
  });
});
