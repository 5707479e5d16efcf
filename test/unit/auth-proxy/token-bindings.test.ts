import { describe, expect, it } from 'vitest';
import { bindingOfAnswer } from '../../../src/auth-proxy/token-bindings.ts';

const JKT = '0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I';

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'RS256' })}.${part(claims)}.c2ln`;
}

function answer(status: number, claims: Record<string, unknown>) {
  const body = JSON.stringify({ access_token: jwt(claims), token_type: 'DPoP' });
  return { status, headers: {}, body };
}

describe("a token endpoint answer's binding", () => {
  const bound = { sid: 's-1', sub: 'u-1', cnf: { jkt: JKT } };

  it("is the access token's session, user and cnf.jkt on a 200", () => {
    expect(bindingOfAnswer('acme', answer(200, bound))).toEqual({
      sessionId: 's-1',
      realm: 'acme',
      userId: 'u-1',
      jkt: JKT,
    });
  });

  it('is none for a bearer token, a refusal, or anything not shaped as Keycloak answers', () => {
    expect(bindingOfAnswer('acme', answer(200, { sid: 's-1', sub: 'u-1' }))).toBeUndefined();
    expect(bindingOfAnswer('acme', answer(400, bound))).toBeUndefined();
    expect(bindingOfAnswer('acme', answer(200, { ...bound, sid: '' }))).toBeUndefined();
    expect(bindingOfAnswer('acme', answer(200, { ...bound, cnf: { jkt: 'x' } }))).toBeUndefined();
    expect(bindingOfAnswer('acme', answer(200, { ...bound, cnf: 'jkt' }))).toBeUndefined();
    expect(bindingOfAnswer('acme', { status: 200, headers: {}, body: '{' })).toBeUndefined();
    const notJwt = { status: 200, headers: {}, body: '{"access_token":"abc"}' };
    expect(bindingOfAnswer('acme', notJwt)).toBeUndefined();
  });
});
