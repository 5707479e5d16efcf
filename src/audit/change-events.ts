import type { AuditEntry } from '../http/audit.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { AuditEvent } from './audit-writer.ts';
import { UNSET_FIELDS } from './unset-fields.ts';

/**
 * The records of one change (an audit line of http/audit.ts: an audited route, a throttle that
 * started, a back-channel logout): in the log of the realm whose user made it, and, once it
 * succeeded, in that of each realm it names (what a platform administrator did to an
 * organization is in the organization's log too). A failed change names only what its caller
 * sent, which may be no organization at all: it stays in the caller's log.
 */
export function changeEventsOf(entry: AuditEntry, atMs: number): AuditEvent[] {
  const logs = new Set<string>();
  if (entry.actor) logs.add(entry.actor.realm);
  if (entry.outcome === 'success') {
    for (const name of ['realm', 'organization'] as const) {
      const named = entry.target[name];
      if (typeof named === 'string') logs.add(named);
    }
    if (entry.action === 'organization.create' && typeof entry.target.id === 'string') {
      logs.add(entry.target.id);
    }
  }
  if (logs.size === 0) logs.add(MASTER_REALM);
  return [...logs].map((org) => ({
    org,
    atMs,
    action: entry.action,
    outcome: entry.outcome,
    ...UNSET_FIELDS,
    actorRealm: entry.actor?.realm ?? null,
    actorId: entry.actor?.userId ?? null,
    actorName: entry.actor?.username ?? null,
    workspace: typeof entry.target.workspace === 'string' ? entry.target.workspace : null,
    result: entry.result ?? null,
    address: entry.clientAddress,
    requestId: entry.requestId ?? null,
    details: { ...entry.target },
  }));
}
