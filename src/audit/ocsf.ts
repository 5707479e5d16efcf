import { VERSION } from '../release/version.ts';
import type { AuditRecord } from './audit-chain.ts';

/** The OCSF schema version the events follow. */
const OCSF_VERSION = '1.3.0';

/** OCSF Identity & Access Management (3), Authentication (3002); Application Activity (6), API Activity (6003). */
const AUTHENTICATION = { category_uid: 3, class_uid: 3002, class_name: 'Authentication' };
const API_ACTIVITY = { category_uid: 6, class_uid: 6003, class_name: 'API Activity' };

/** Authentication's activity: Logon (1); API Activity's: Create (1), Read (2), Update (3), Delete (4), Other (99). */
function apiActivityOf(record: AuditRecord): number {
  const verb = record.action.split('.').pop() ?? '';
  if (/^(create|issue)/.test(verb)) return 1;
  if (/^(read|export|list)/.test(verb) || record.method === 'GET') return 2;
  if (/^(delete|revoke)/.test(verb)) return 4;
  if (/^(change|update|enable|disable|password|apply|refresh|start)/.test(verb)) return 3;
  return 99;
}

/**
 * One record as an OCSF event (https://schema.ocsf.io) for a SIEM: an `/api` decision or a
 * token grant is an Authentication event (Logon; success or failure, its reason as the status
 * detail), a change or a read an API Activity event. The record's own fields stay in
 * `unmapped`, its hash in `metadata.uid`: a SIEM can still tie an event to the chain.
 */
export function ocsfEventOf(record: AuditRecord): Record<string, unknown> {
  const authentication = record.action === 'api.request' || record.action === 'token.grant';
  const kind = authentication ? AUTHENTICATION : API_ACTIVITY;
  const activityId = authentication ? 1 : apiActivityOf(record);
  const success = record.outcome === 'success';
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
    ...(record.actorName !== null && {
      user: {
        name: record.actorName,
        ...(record.actorId !== null && { uid: record.actorId }),
        ...(record.actorRealm !== null && { domain: record.actorRealm }),
      },
    }),
    ...(record.address !== null && { src_endpoint: { ip: record.address } }),
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
    },
  };
}
