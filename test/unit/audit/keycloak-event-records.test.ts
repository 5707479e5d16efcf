import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  adminEventRecord,
  REALM_EVENTS_SETTINGS,
  userEventRecord,
} from '../../../src/audit/keycloak-event-records.ts';
import { attributesOf } from '../../../src/audit/otel-delivery.ts';
import { UNSET_FIELDS } from '../../../src/audit/unset-fields.ts';

describe("Keycloak's events as audit records", () => {
  it('keeps a user event’s chosen fields and named details only', () => {
    const record = userEventRecord('org-a', {
      id: 'e1',
      time: 1_764_000_000_123,
      type: 'LOGIN_ERROR',
      clientId: 'admin-cli',
      userId: 'u1',
      ipAddress: '203.0.113.7',
      error: 'invalid_user_credentials',
      details: {
        username: 'alice',
        grant_type: 'password',
        auth_method: 'openid-connect',
        // What a detail could carry that the log must not.
        redirect_uri: 'https://app.example/cb?code=secret-code',
        code_id: 'secret-code-id',
      },
    });
    expect(record).toEqual({
      ...UNSET_FIELDS,
      org: 'org-a',
      atMs: 1_764_000_000_123,
      action: 'keycloak.login',
      outcome: 'failure',
      actorRealm: 'org-a',
      actorId: 'u1',
      actorName: 'alice',
      clientId: 'admin-cli',
      reason: 'invalid_user_credentials',
      address: '203.0.113.7',
      details: {
        source: 'keycloak',
        keycloakEventId: 'e1',
        keycloakType: 'LOGIN_ERROR',
        grant_type: 'password',
        auth_method: 'openid-connect',
      },
    });
  });

  it('names an admin event by resource and operation, never its representation', () => {
    const record = adminEventRecord(
      'org-a',
      {
        id: 'e2',
        time: 5,
        operationType: 'UPDATE',
        resourceType: 'REALM_ROLE_MAPPING',
        resourcePath: 'users/u2/role-mappings/realm',
        authDetails: { realmId: 'master-id', clientId: 'c-uuid', userId: 'u3', ipAddress: '::1' },
        ...{ representation: '{"secret":"s3cr3t"}', details: { secret: 's3cr3t' } },
      },
      new Map([['master-id', 'master']]),
    );
    expect(record).toMatchObject({
      action: 'keycloak.admin.realm-role-mapping.update',
      outcome: 'success',
      actorRealm: 'master',
      actorId: 'u3',
      address: '::1',
      path: 'users/u2/role-mappings/realm',
      details: {
        source: 'keycloak',
        keycloakEventId: 'e2',
        keycloakType: 'UPDATE REALM_ROLE_MAPPING',
        authClient: 'c-uuid',
      },
    });
    expect(JSON.stringify(record)).not.toContain('s3cr3t');
  });

  it('asks Keycloak to keep admin events without their bodies', () => {
    expect(REALM_EVENTS_SETTINGS).toMatchObject({
      eventsEnabled: true,
      adminEventsEnabled: true,
      adminEventsDetailsEnabled: false,
    });
  });

  it('gives OpenTelemetry the same fields, a token by the SHA-256 of its jti', () => {
    const attributes = attributesOf({
      ...userEventRecord('org-a', { id: 'e3', time: 1, type: 'LOGIN', userId: 'u1' }),
      tokenId: 'the-jti',
    });
    expect(attributes).toEqual({
      'realmgate.audit.org': 'org-a',
      'realmgate.audit.action': 'keycloak.login',
      'realmgate.audit.outcome': 'success',
      'realmgate.audit.actor.realm': 'org-a',
      'realmgate.audit.actor.id': 'u1',
      'realmgate.audit.jti_sha256': createHash('sha256').update('the-jti').digest('hex'),
      'realmgate.audit.details.source': 'keycloak',
      'realmgate.audit.details.keycloakEventId': 'e3',
      'realmgate.audit.details.keycloakType': 'LOGIN',
    });
    expect(JSON.stringify(attributes)).not.toContain('the-jti');
  });
});
