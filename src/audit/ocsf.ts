import { isIP } from 'node:net';
import { VERSION } from '../release/version.ts';
import type { AuditRecord } from './audit-chain.ts';
import { SUMMARY_ACTIONS } from './refusal-summaries.ts';

/** The OCSF schema version the events follow. */
const OCSF_VERSION = '1.3.0';

/** OCSF Identity & Access Management (3), Authentication (3002); Application Activity (6), API Activity (6003). */
const AUTHENTICATION = { category_uid: 3, class_uid: 3002, class_name: 'Authentication' };
const API_ACTIVITY = { category_uid: 6, class_uid: 6003, class_name: 'API Activity' };

/**
 * The Authentication activity of a record that is one, else undefined: an `/api` decision, an
 * `/auth` refusal, a token grant and a sign-in Keycloak saw are a Logon (1), a sign-out Keycloak saw a Logoff (2).
 */
function authenticationOf(action: string): number | undefined {
  if (
    [
      'api.request',
      'auth.request',
      'token.grant',
      ...SUMMARY_ACTIONS,
      'keycloak.login',
      'keycloak.client-login',
    ].includes(action)
  ) {
    return 1;
  }
  return action === 'keycloak.logout' ? 2 : undefined;
}

/** API Activity's: Create (1), Read (2), Update (3), Delete (4), Other (99). */
function apiActivityOf(record: AuditRecord): number {
  const verb = record.action.split('.').pop() ?? '';
  if (/^(create|issue)/.test(verb)) return 1;
  if (/^(read|export|list)/.test(verb) || record.method === 'GET') return 2;
  if (/^(delete|revoke)/.test(verb)) return 4;
  if (/^(change|update|enable|disable|password|apply|refresh|start)/.test(verb)) return 3;
  return 99;
}

/**
 * One record as an OCSF event (https://schema.ocsf.io) for a SIEM: an `/api` decision, an
 * `/auth` refusal, a token grant (any, or a summary of their refusals, with OCSF's `count`, `start_time` and
 * `end_time`) or a sign-in or sign-out Keycloak saw is an Authentication event (success or
 * failure, its reason as the status detail; the caller is the `user` authenticated), a change
 * or a read an API Activity event (the caller is its `actor`, as that class requires). The
 * record's own fields stay in `unmapped`, its hash in `metadata.uid`: a SIEM can still tie an
 * event to the chain.
 */
export function ocsfEventOf(record: AuditRecord): Record<string, unknown> {
  const logon = authenticationOf(record.action);
  const authentication = logon !== undefined;
  const kind = authentication ? AUTHENTICATION : API_ACTIVITY;
  const activityId = logon ?? apiActivityOf(record);
  const success = record.outcome === 'success';
  // A Keycloak admin event knows its administrator by id alone.
  const caller = (record.actorName !== null || record.actorId !== null) && {
    ...(record.actorName !== null && { name: record.actorName }),
    ...(record.actorId !== null && { uid: record.actorId }),
    ...(record.actorRealm !== null && { domain: record.actorRealm }),
  };
  return {
    ...kind,
    activity_id: activityId,
    type_uid: kind.class_uid * 100 + activityId,
    time: Date.parse(record.at),
    severity_id: success ? 1 : 3,
    status_id: success ? 1 : 2,
    status: success ? 'Success' : 'Failure',
    ...(record.status !== null && { status_code: String(record.status) }),
    ...(record.reason !== null && { status_detail: record.reason }),
    metadata: {
      version: OCSF_VERSION,
      product: { name: 'realmgate', vendor_name: 'realmgate', version: VERSION },
      uid: record.hash,
      sequence: record.seq,
      tenant_uid: record.org,
      ...(record.requestId !== null && { correlation_uid: record.requestId }),
    },
    ...(caller && (authentication ? { user: caller } : { actor: { user: caller } })),
    ...(SUMMARY_ACTIONS.includes(record.action) && summarisedOf(record)),
    // A summary's IPv6 client is its /64 (refusal-summaries.ts): no IP address, which a SIEM
    // would check `ip` to be; kept in `unmapped`.
    ...(record.address !== null &&
      isIP(record.address) !== 0 && { src_endpoint: { ip: record.address } }),
    ...(record.path !== null && {
      http_request: {
        http_method: record.method,
        url: { path: record.path },
      },
    }),
    ...(!authentication && { api: { operation: record.action } }),
    ...(authentication &&
      record.credential !== null && { auth_protocol: record.credential, auth_protocol_id: 99 }),
    unmapped: {
      action: record.action,
      clientId: record.clientId,
      jobCredential: record.jobCredential,
      jtiSha256: record.jtiSha256,
      jkt: record.jkt,
      route: record.route,
      workspace: record.workspace,
      result: record.result,
      details: record.details,
      ...(record.address !== null && isIP(record.address) === 0 && { address: record.address }),
    },
  };
}

/** OCSF's own fields of an aggregate: how many events, from when to when. */
function summarisedOf(record: AuditRecord): Record<string, number> {
  const { count, first, last } = record.details;
  return {
    count: Number(count),
    start_time: Date.parse(String(first)),
    end_time: Date.parse(String(last)),
  };
}
