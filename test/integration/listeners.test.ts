import { describe, expect, it } from 'vitest';
import { buildInfo } from '../../src/release/build-info.ts';
import { VERSION } from '../../src/release/version.ts';
import { testEnv } from '../helpers/test-env.ts';

async function get(url: string) {
  const res = await fetch(url, { redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, text, headers: res.headers };
}

describe('public and admin listeners', () => {
  it('refuses the Keycloak console and admin API on the public listener with 404 in the envelope', async () => {
    for (const path of [
      '/auth/admin/master/console/',
      '/auth/admin/realms/master/users',
      '/auth/ADMIN/',
    ]) {
      const res = await get(`${testEnv().publicUrl}${path}`);
      expect(res.status).toBe(404);
      const body = JSON.parse(res.text) as Record<string, unknown>;
      expect(body).toMatchObject({ data: null, result: '404-00000' });
      expect(body.ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });

  it('refuses paths that could be normalised into the admin API', async () => {
    for (const path of [
      '/auth//admin/master/console/',
      '/auth/realms/../admin/master/console/',
      '/auth/realms/%2e%2e/admin/master/console/',
      '/auth/realms%2F..%2Fadmin/master/console/',
      '/auth/%61dmin/master/console/',
      '/auth/realms/master/..%5cadmin/',
    ]) {
      const res = await get(`${testEnv().publicUrl}${path}`);
      expect([400, 404]).toContain(res.status);
      expect(JSON.parse(res.text)).toMatchObject({ data: null });
    }
  });

  it('serves the Keycloak console on the admin listener', async () => {
    const res = await get(`${testEnv().adminUrl}/auth/admin/master/console/`);
    expect(res.status).toBe(200);
    expect(res.text).toContain('<html');
  });

  it('answers /healthz and /readyz on both listeners; the version only on the admin one', async () => {
    for (const [base, data] of [
      [testEnv().publicUrl, { status: 'up' }],
      [testEnv().adminUrl, { status: 'up', version: VERSION, revision: buildInfo().revision }],
    ] as const) {
      const health = await get(`${base}/healthz`);
      expect(health.status).toBe(200);
      expect(JSON.parse(health.text)).toEqual({
        data,
        message: 'SUCCESS',
        result: '000-00000',
        ts: expect.any(String) as unknown,
      });
      const ready = await get(`${base}/readyz`);
      expect(ready.status).toBe(200);
      expect(JSON.parse(ready.text)).toMatchObject({
        data: { keycloak: 'up', database: 'up', cache: 'up' },
        result: '000-00000',
      });
    }
  });

  it('answers unknown routes with 404 in the envelope and echoes a request id', async () => {
    const res = await get(`${testEnv().publicUrl}/no/such/route`);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text)).toMatchObject({ data: null, result: '404-00000' });
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers an oversized request head with 431 in the envelope', async () => {
    const res = await fetch(`${testEnv().publicUrl}/healthz`, {
      headers: { 'x-big': 'a'.repeat(20_000) },
    });
    expect(res.status).toBe(431);
    expect(await res.json()).toMatchObject({ data: null, result: '431-00000' });
  });
});
