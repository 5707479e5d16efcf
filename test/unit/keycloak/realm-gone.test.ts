import { describe, expect, it } from 'vitest';
import {
  isClientMissing,
  isRealmGone,
  isRealmGoneError,
  isRealmMissing,
} from '../../../src/keycloak/realm-gone.ts';

/** Keycloak's words for a realm it does not have, and only those: a 404 alone is no proof. */
describe('realm-gone', () => {
  it("reads Keycloak's 404 for an unknown realm on its OpenID Connect endpoints", () => {
    expect(isRealmGone(404, '{"error":"Realm does not exist"}')).toBe(true);
    // A proxy in front of Keycloak answering 404 while Keycloak is away.
    expect(isRealmGone(404, '<html>Not Found</html>')).toBe(false);
    expect(isRealmGone(404, '{"error":"Client not found"}')).toBe(false);
    expect(isRealmGone(400, '{"error":"Realm does not exist"}')).toBe(false);
  });

  it("reads openid-client's error for that answer", () => {
    expect(isRealmGoneError({ status: 404, error: 'Realm does not exist' })).toBe(true);
    expect(isRealmGoneError({ status: 400, error: 'invalid_grant' })).toBe(false);
    expect(isRealmGoneError(undefined)).toBe(false);
  });

  it("reads the admin API's 404 for an unknown realm, not another resource's", () => {
    const missing = (error: string) => ({ response: { status: 404 }, responseData: { error } });
    expect(isRealmMissing(missing('Realm not found.'))).toBe(true);
    expect(isRealmMissing(missing('Could not find client'))).toBe(false);
  });

  it("reads the admin API's 404 for an unknown client, not a proxy's", () => {
    const answer = (responseData: unknown) => ({ response: { status: 404 }, responseData });
    expect(isClientMissing(answer({ error: 'Client not found' }))).toBe(true);
    expect(isClientMissing(answer('<html><body>404 Not Found</body></html>'))).toBe(false);
    expect(isClientMissing(answer({ error: 'Realm not found.' }))).toBe(false);
    expect(
      isClientMissing({ response: { status: 400 }, responseData: { error: 'Client not found' } }),
    ).toBe(false);
  });
});
