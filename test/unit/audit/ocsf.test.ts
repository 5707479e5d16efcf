import { describe, expect, it } from 'vitest';
import { GENESIS_HASH, type AuditRecord } from '../../../src/audit/audit-chain.ts';
import { ocsfEventOf } from '../../../src/audit/ocsf.ts';

const base: AuditRecord = {
  org: 'acme',
  seq: 7,
  at: '2026-11-03T08:12:40.118Z',
  action: 'api.request',
  outcome: 'failure',
  actorRealm: 'acme',
  actorId: null,
  actorName: 'bob',
  credential: 'basic',
  clientId: null,
  jobCredential: null,
  jtiSha256: null,
  jkt: null,
  method: 'GET',
  route: '/api/{organization_id}/platform/workspaces',
  path: '/api/acme/platform/workspaces',
  workspace: null,
  status: 401,
  result: '401-00002',
  reason: 'wrong_password',
  address: '203.0.113.7',
  requestId: 'r7',
  details: {},
  prevHash: GENESIS_HASH,
  hash: 'ab'.repeat(32),
};

describe('OCSF events of audit records', () => {
  it('makes an /api decision an Authentication event (Logon), its reason the status detail', () => {
    expect(ocsfEventOf(base)).toMatchObject({
      class_uid: 3002,
      category_uid: 3,
      activity_id: 1,
      type_uid: 300201,
      time: Date.parse(base.at),
      status_id: 2,
      status_code: '401',
      status_detail: 'wrong_password',
      user: { name: 'bob', domain: 'acme' },
      src_endpoint: { ip: '203.0.113.7' },
      http_request: { http_method: 'GET', url: { path: '/api/acme/platform/workspaces' } },
      metadata: { uid: base.hash, sequence: 7, tenant_uid: 'acme', correlation_uid: 'r7' },
    });
  });

  it("makes an /auth refusal an Authentication event (Logon) of its job credential's token", () => {
    const refused: AuditRecord = {
      ...base,
      action: 'auth.request',
      actorRealm: null,
      actorName: null,
      credential: 'bearer',
      jobCredential: 'nightly',
      path: '/auth/realms/acme/account/',
      status: 403,
      result: null,
      reason: 'out_of_reach',
    };
    const event = ocsfEventOf(refused);
    expect(event).toMatchObject({
      class_uid: 3002,
      activity_id: 1,
      status_id: 2,
      status_code: '403',
      status_detail: 'out_of_reach',
      auth_protocol: 'bearer',
      unmapped: { action: 'auth.request', jobCredential: 'nightly' },
    });
    expect(event).not.toHaveProperty('api');
  });

  it('makes a summary of refusals an Authentication event of its count and its time span', () => {
    const summary: AuditRecord = {
      ...base,
      action: 'api.request.summary',
      actorRealm: null,
      actorName: null,
      method: null,
      route: null,
      path: null,
      requestId: null,
      details: { count: '4210', first: '2026-11-03T08:11:41.002Z', last: base.at },
    };
    expect(ocsfEventOf(summary)).toMatchObject({
      class_uid: 3002,
      activity_id: 1,
      status_id: 2,
      status_detail: 'wrong_password',
      count: 4210,
      start_time: Date.parse('2026-11-03T08:11:41.002Z'),
      end_time: Date.parse(base.at),
      src_endpoint: { ip: '203.0.113.7' },
      unmapped: { action: 'api.request.summary' },
    });
  });

  it("gives an IPv6 client's /64 of a summary as a subnet, never as an IP address", () => {
    const event = ocsfEventOf({
      ...base,
      action: 'api.request.summary',
      address: '2001:db8:1:2::/64',
      details: { count: '90', first: base.at, last: base.at },
    });
    expect(event).not.toHaveProperty('src_endpoint');
    expect(event).toMatchObject({ unmapped: { address: '2001:db8:1:2::/64' } });
  });

  it('makes a summary of failed token grants an Authentication event of its count and its time span', () => {
    const summary: AuditRecord = {
      ...base,
      action: 'token.grant.summary',
      actorRealm: null,
      actorName: null,
      credential: null,
      clientId: '_acme-api',
      method: null,
      route: null,
      path: null,
      status: 401,
      result: null,
      reason: 'wrong_credentials',
      requestId: null,
      details: {
        grantType: 'password',
        count: '57',
        first: '2026-11-03T08:11:41.002Z',
        last: base.at,
      },
    };
    expect(ocsfEventOf(summary)).toMatchObject({
      class_uid: 3002,
      activity_id: 1,
      status_id: 2,
      status_detail: 'wrong_credentials',
      count: 57,
      start_time: Date.parse('2026-11-03T08:11:41.002Z'),
      end_time: Date.parse(base.at),
      src_endpoint: { ip: '203.0.113.7' },
      unmapped: { action: 'token.grant.summary' },
    });
  });

  it('makes a change an API Activity event of its kind', () => {
    const change = (action: string) =>
      ocsfEventOf({ ...base, action, outcome: 'success', method: null, path: null, status: null });
    expect(change('user.delete')).toMatchObject({ class_uid: 6003, activity_id: 4, status_id: 1 });
    expect(change('organization.create')).toMatchObject({ type_uid: 600301 });
    expect(change('token_lifetimes.change')).toMatchObject({ activity_id: 3 });
    expect(change('audit_log.export')).toMatchObject({
      activity_id: 2,
      api: { operation: 'audit_log.export' },
    });
  });

  it("names a change's caller as the API Activity's actor, the attribute that class requires", () => {
    const change = ocsfEventOf({ ...base, action: 'token_lifetimes.change', outcome: 'success' });
    expect(change).toMatchObject({
      class_uid: 6003,
      actor: { user: { name: 'bob', domain: 'acme' } },
      src_endpoint: { ip: '203.0.113.7' },
    });
    // API Activity has no `user`: a SIEM validating the class would drop or refuse it.
    expect(change).not.toHaveProperty('user');
    // A Keycloak admin event names its administrator by id alone.
    expect(
      ocsfEventOf({
        ...base,
        action: 'keycloak.admin.user.create',
        actorName: null,
        actorId: 'u1',
      }),
    ).toMatchObject({ actor: { user: { uid: 'u1', domain: 'acme' } } });
  });

  it("makes Keycloak's sign-ins and sign-outs Authentication events, Logon and Logoff", () => {
    const keycloak = (action: string) =>
      ocsfEventOf({ ...base, action, credential: null, method: null, path: null, status: null });
    expect(keycloak('keycloak.login')).toMatchObject({
      class_uid: 3002,
      activity_id: 1,
      type_uid: 300201,
      user: { name: 'bob' },
      status_detail: 'wrong_password',
    });
    expect(keycloak('keycloak.client-login')).toMatchObject({ class_uid: 3002, activity_id: 1 });
    expect(keycloak('keycloak.logout')).toMatchObject({
      class_uid: 3002,
      activity_id: 2,
      type_uid: 300202,
    });
    expect(keycloak('keycloak.admin.user.create')).toMatchObject({
      class_uid: 6003,
      activity_id: 1,
    });
  });
});
