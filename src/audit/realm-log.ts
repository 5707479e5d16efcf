import type { IncomingMessage } from 'node:http';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { OrganizationLookup } from '../tenancy/organization-state.ts';
import type { Clock } from '../time/clock.ts';
import type { AuditEvent } from './audit-writer.ts';

/** Whether `realm` has a log of its own; rejects when that could not be looked up. */
export type RealmLogCheck = (realm: string, client?: string) => Promise<boolean>;

/**
 * The one rule of which realms have a log: master, and each organization that exists (a
 * disabled one too), as the directory knows them. A record about a realm a client named (a
 * token grant, an `/auth` refusal: `recordInRealmLog`; a throttle that started:
 * change-events.ts) goes to that realm's log only when it has one, else to master's, naming it
 * (bounded) in `details.realm`, and so does one whose realm could not be looked up: anyone can
 * name a realm, and that must not make a log. A lookup it needs is charged to `client`'s share
 * of the directory's (a flood of records naming made-up realms spends its sender's, not what is
 * kept for others).
 */
export function realmLogCheck(directory: Pick<OrganizationLookup, 'stateOf'>): RealmLogCheck {
  return async (realm, client) =>
    realm === MASTER_REALM || (await directory.stateOf(realm, client)) !== 'absent';
}

/** What the `/auth` records need to file an event into the log of the realm it concerns. */
export interface RealmLogDeps {
  record: (event: AuditEvent) => void;
  /** Whether the realm has a log (`realmLogCheck`). */
  isLog: RealmLogCheck;
  clientAddress: (req: IncomingMessage) => string;
  clock: Clock;
}

/**
 * Records `eventOf(isLog)` once it is known whether `realm` has a log of its own (`isLog`: the
 * event goes there, else into master's, naming the realm). The lookup is charged to `client`;
 * one that fails, or no realm at all, files the event into master's: a record is never lost to
 * a directory that could not answer.
 */
export function recordInRealmLog(
  deps: RealmLogDeps,
  realm: string | undefined,
  client: string,
  eventOf: (isLog: boolean) => AuditEvent,
): void {
  const logOf = realm === undefined ? Promise.resolve(false) : deps.isLog(realm, client);
  void logOf.then(
    (isLog) => deps.record(eventOf(isLog)),
    () => deps.record(eventOf(false)),
  );
}
