import { describe, expect, it } from 'vitest';
import {
  refreshTokenSession,
  tokenSessionId,
} from '../../../src/auth-proxy/refresh-token-claims.ts';

/** An unsigned JWT with these claims (the reader never verifies: Keycloak does). */
const jwt = (claims: Record<string, unknown>) =>
  `${Buffer.from('{"alg":"HS512"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.c2ln`;

describe('the session a refresh token names', () => {
  it('reads sid, sub and azp of a refresh or offline token', () => {
    for (const typ of ['Refresh', 'Offline']) {
      expect(refreshTokenSession(jwt({ typ, sid: 's1', sub: 'u1', azp: 'app-a' }))).toEqual({
        sessionId: 's1',
        userId: 'u1',
        clientId: 'app-a',
      });
    }
    expect(refreshTokenSession(jwt({ typ: 'Refresh', sid: 's1' }))).toEqual({
      sessionId: 's1',
      userId: undefined,
      clientId: undefined,
    });
  });

  it('reads the claims whatever follows the payload, as Keycloak reads the same token', () => {
    const token = jwt({ typ: 'Refresh', sid: 's1', sub: 'u1' });
    for (const value of [`${token}==`, `${token}=x`, `${token}.`, `${token}+/`, `${token}\nc2ln`]) {
      expect(refreshTokenSession(value), JSON.stringify(value)).toMatchObject({ sessionId: 's1' });
    }
    // A padded header or payload is another text than the one Keycloak signed: no claims.
    const [header, payload, signature] = token.split('.');
    expect(refreshTokenSession(`${header}.${payload}==.${signature}`)).toBeUndefined();
  });

  it('names none for any other token or value', () => {
    for (const value of [
      jwt({ typ: 'Bearer', sid: 's1', sub: 'u1' }),
      jwt({ typ: 'Refresh', sid: '' }),
      jwt({ typ: 'Refresh' }),
      // Keycloak names its sessions in printable ASCII: a NUL (which PostgreSQL refuses in
      // text), a control character, a space or a name past 255 is no session of Keycloak's.
      jwt({ typ: 'Refresh', sid: 'a\u0000b' }),
      jwt({ typ: 'Refresh', sid: 'a b' }),
      jwt({ typ: 'Refresh', sid: '\ud800' }),
      jwt({ typ: 'Refresh', sid: 's'.repeat(256) }),
      'r'.repeat(800),
      'a.b.c',
      `${'a'.repeat(10)}.!!!.c`,
      '',
    ]) {
      expect(refreshTokenSession(value)).toBeUndefined();
    }
  });
});

describe('the session any token names', () => {
  it("is read as a refresh token's is, and refused as its is", () => {
    expect(tokenSessionId(jwt({ typ: 'Bearer', sid: 's1' }))).toBe('s1');
    for (const sid of ['', 'a\u0000b', 'a b', '\ud800', 's'.repeat(256), 7]) {
      expect(tokenSessionId(jwt({ typ: 'Bearer', sid })), JSON.stringify(sid)).toBeUndefined();
    }
  });
});
