import { beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * What the gateway answers itself carries audit records, refresh tokens' sessions and the
 * platform's lists: a browser must not keep it on disk (`Cache-Control: no-store`), success or
 * refusal, on `/api` and on `/auth`'s own refusals of a token request.
 */
describe("the gateway's own answers are never stored", () => {
  let org: string;
  let reader: TestUser;
  let admin: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    reader = await createUser(org, { workspaceRoles: ['ws1'] });
    await grantReaderRole(reader);
    admin = basicAuth(await createUser('master'));
  });

  it.each([
    ['the audit log', () => `/api/${org}/platform/audit-log`, () => basicAuth(reader), 200],
    [
      'the download jobs',
      () => `/api/${org}/platform/auditlog/download`,
      () => basicAuth(reader),
      200,
    ],
    [
      'the retention',
      () => `/api/${org}/platform/audit-log/retention`,
      () => basicAuth(reader),
      200,
    ],
    [
      'the refresh tokens',
      () => `/api/${org}/platform/users/_current/refresh_tokens`,
      () => basicAuth(reader),
      200,
    ],
    ['the organizations', () => '/api/platform/organizations', () => admin, 200],
    ["the administrators' audit log", () => '/api/platform/audit-log', () => admin, 200],
    ['a refusal', () => `/api/${org}/platform/audit-log`, () => 'Bearer nonsense', 401],
  ])('%s', async (_name, path, authorization, status) => {
    const answer = await callApi(path(), authorization());
    expect(answer.status).toBe(status);
    expect(answer.headers.get('cache-control')).toBe('no-store');
  });

  it("the token endpoint's refusals made before Keycloak", async () => {
    const gateway = `${testEnv().publicUrl}/auth`;
    const refusals = await Promise.all([
      // The form guard: a broken percent escape.
      postToken(gateway, org, 'username=%zz&grant_type=password'),
      // The bootstrap administrator's guard.
      postToken(
        gateway,
        'master',
        passwordGrantBody({
          realm: 'master',
          username: testEnv().keycloakAdminUsername,
          password: 'whatever',
        }),
      ),
      // The DPoP key guard: two proofs in one header.
      postToken(gateway, org, passwordGrantBody(reader), { dpop: 'a.b.c, d.e.f' }),
    ]);
    for (const refusal of refusals) {
      expect(refusal.status).toBe(400);
      expect(refusal.headers.get('cache-control')).toBe('no-store');
    }
  });

  // A readiness or liveness answer kept by a proxy tells a load balancer what was, not what is.
  it.each([
    ['/healthz', 'public'],
    ['/readyz', 'public'],
    ['/healthz', 'admin'],
    ['/readyz', 'admin'],
    ['/metrics', 'admin'],
  ] as const)('%s on the %s listener', async (path, listener) => {
    const base = listener === 'admin' ? testEnv().adminUrl : testEnv().publicUrl;
    const answer = await fetch(`${base}${path}`);
    expect(answer.ok).toBe(true);
    expect(answer.headers.get('cache-control')).toBe('no-store');
  });
});
