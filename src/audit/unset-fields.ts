import type { AuditEvent } from './audit-writer.ts';

/**
 * The optional fields of a record, none set: a record's maker spreads it and names what it
 * knows, so that each maker lists only its own fields.
 */
export const UNSET_FIELDS = {
  actorRealm: null,
  actorId: null,
  actorName: null,
  credential: null,
  clientId: null,
  jobCredential: null,
  jkt: null,
  method: null,
  route: null,
  path: null,
  workspace: null,
  status: null,
  result: null,
  reason: null,
  address: null,
  requestId: null,
} as const satisfies Partial<AuditEvent>;
