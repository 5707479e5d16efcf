import { describe, expect, it } from 'vitest';
import { LEGACY_LINKS_SCRIPT } from '../../src/auth-proxy/console-legacy-links.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { testEnv } from '../helpers/test-env.ts';

const CONSOLE = '/auth/admin/master/console/';

async function get(url: string) {
  const res = await fetch(url, { redirect: 'manual' });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** The admin listener under a name other than ADMIN_PUBLIC_URL's (127.0.0.1 ↔ localhost). */
function otherName(url: string): string {
  const other = new URL(url);
  other.hostname = other.hostname === '127.0.0.1' ? 'localhost' : '127.0.0.1';
  return other.origin;
}

describe("the console page on the admin listener (Keycloak's real page)", () => {
  it('carries the old-address script first in <head>, under a policy that lets it run', async () => {
    const res = await get(`${testEnv().adminUrl}${CONSOLE}`);
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/<head>\s*<script>/);
    expect(res.text.split(LEGACY_LINKS_SCRIPT)).toHaveLength(2);
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(res.text));
    // Keycloak's default policy has no script directive: it is passed on as Keycloak sent it.
    expect(res.headers.get('content-security-policy')).toMatch(/frame-ancestors 'self'/);
    expect(res.headers.get('content-security-policy')).not.toMatch(/script-src|sha256/);
    // The console signs in on the admin listener.
    expect(res.text).toContain(`"serverBaseUrl": "${testEnv().adminUrl}/auth"`);
  });

  it("sends Keycloak's login form back to the admin listener", async () => {
    const auth = new URLSearchParams({
      client_id: 'security-admin-console',
      redirect_uri: `${testEnv().adminUrl}${CONSOLE}`,
      response_type: 'code',
      scope: 'openid',
      code_challenge_method: 'S256',
      code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
    });
    const page = await get(
      `${testEnv().adminUrl}/auth/realms/master/protocol/openid-connect/auth?${auth.toString()}`,
    );
    expect(page.status).toBe(200);
    const action = /action="([^"]+)"/.exec(page.text)?.[1] ?? '';
    expect(action.startsWith(`${testEnv().adminUrl}/auth/realms/master/login-actions/`)).toBe(true);
  });

  it('is redirected to ADMIN_PUBLIC_URL from any other host name, never to the Host sent', async () => {
    const other = await get(`${otherName(testEnv().adminUrl)}${CONSOLE}?x=1`);
    expect(other.status).toBe(302);
    expect(other.headers.get('location')).toBe(`${testEnv().adminUrl}${CONSOLE}?x=1`);

    const hostile = await rawRequest(
      testEnv().adminUrl,
      `GET ${CONSOLE} HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`,
    );
    expect(hostile.status).toBe(302);
    expect(hostile.headers.location).toBe(`${testEnv().adminUrl}${CONSOLE}`);

    const bare = await get(`${testEnv().adminUrl}/auth/admin/master/console`);
    expect(bare.headers.get('location')).toBe(`${testEnv().adminUrl}${CONSOLE}`);
  });

  it('is never served, rewritten or redirected on the public listener', async () => {
    for (const base of [testEnv().publicUrl, otherName(testEnv().publicUrl)]) {
      const res = await get(`${base}${CONSOLE}`);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain(LEGACY_LINKS_SCRIPT);
    }
  });
});
