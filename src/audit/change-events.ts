import { DPOP_AFTER, DPOP_BEFORE, type AuditEntry } from '../http/audit.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { AuditEvent } from './audit-writer.ts';
import { recordInRealmLogs, type RealmLogDeps } from './realm-log.ts';
import { UNSET_FIELDS } from './unset-fields.ts';

/**
 * The records of one change (an audit line of http/audit.ts: an audited route, a throttle that
 * started, a back-channel logout): in the log of the realm whose user made it, and, once it
 * succeeded, in that of each realm it names (what a platform administrator did to an
 * organization is in the organization's log too). A change of several realms at once (`realms`)
 * is in each one's log, naming that realm only: one organization does not learn the others'
 * names; the caller's log names them all. A failed change names only what its caller sent,
 * which may be no organization at all: it stays in the caller's log. A realm `hasLog` denies is
 * named in the record, not given it (`recordChanges`).
 */
export function changeEventsOf(
  entry: AuditEntry,
  atMs: number,
  hasLog: (realm: string) => boolean = () => true,
): AuditEvent[] {
  const logs = new Set<string>();
  if (entry.actor) logs.add(entry.actor.realm);
  for (const realm of realmsNamedBy(entry)) if (hasLog(realm)) logs.add(realm);
  if (logs.size === 0) logs.add(MASTER_REALM);
  const changes = [entry, ...distinctChangesIn(entry)];
  return changes.flatMap((change) =>
    [...logs].map((org) => eventOf(change, org, atMs, detailsIn(change, org))),
  );
}

/**
 * Hands `record` the records of each change (`changeEventsOf`). Who made a change vouches for
 * the realms it names: the route that changed them found them. An event no authenticated caller
 * made does not (a throttle that started names the realm of the login form a client posted to,
 * any name at all): the realms it names get its record under the rule of a token grant's and an
 * `/auth` refusal's (realm-log.ts), their own log only when the gateway serves them, else
 * master's, naming them in `details`. A look-alike or made-up realm makes no log (a head row, a
 * chain the checkpointer signs), and an organization's administrator sees only what concerns
 * their organization.
 */
export function recordChanges(
  deps: Pick<RealmLogDeps, 'record' | 'isLog' | 'pending'> & { now: () => number },
): (entry: AuditEntry) => void {
  return (entry) => {
    const atMs = deps.now();
    const named = entry.actor ? [] : realmsNamedBy(entry);
    if (named.length === 0) {
      for (const event of changeEventsOf(entry, atMs)) deps.record(event);
      return;
    }
    recordInRealmLogs(deps, named, entry.clientAddress, (hasLog) =>
      changeEventsOf(entry, atMs, hasLog),
    );
  };
}

/** The realms a change that succeeded names, besides its caller's. */
function realmsNamedBy(entry: AuditEntry): string[] {
  if (entry.outcome !== 'success') return [];
  const named: string[] = [];
  for (const name of ['realm', 'organization'] as const) {
    const realm = entry.target[name];
    if (typeof realm === 'string') named.push(realm);
  }
  if (entry.action === 'organization.create' && typeof entry.target.id === 'string') {
    named.push(entry.target.id);
  }
  named.push(...(entry.realms ?? []));
  return named;
}

/** What a change's record says in one log: its target, and of a change of several realms, which. */
function detailsIn(entry: AuditEntry, org: string): AuditEvent['details'] {
  if (entry.realms === undefined) return { ...entry.target };
  const callers = org === (entry.actor?.realm ?? MASTER_REALM);
  return callers ? { ...entry.target, realms: [...entry.realms] } : { ...entry.target, realm: org };
}

/**
 * The changes an entry holds that deserve a record of their own, besides the entry's: the DPoP
 * switch of an organization (`dpop.required.changed`, from and to), which an auditor asks about
 * by name and which a token-lifetimes change would otherwise hide among its fields.
 */
function distinctChangesIn(entry: AuditEntry): AuditEntry[] {
  const before = entry.target[DPOP_BEFORE];
  const after = entry.target[DPOP_AFTER];
  if (entry.outcome !== 'success' || typeof before !== 'string' || typeof after !== 'string') {
    return [];
  }
  if (before === after) return [];
  const { realm } = entry.target;
  return [
    {
      ...entry,
      action: 'dpop.required.changed',
      target: { ...(realm === undefined ? {} : { realm }), from: before, to: after },
    },
  ];
}

function eventOf(
  entry: AuditEntry,
  org: string,
  atMs: number,
  details: AuditEvent['details'],
): AuditEvent {
  return {
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
    reason: entry.reason ?? null,
    address: entry.clientAddress,
    requestId: entry.requestId ?? null,
    details,
  };
}
