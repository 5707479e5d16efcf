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

/**
 * The records waiting for a lookup before they reach the writer: whether their realm has a log,
 * whether a refused token is one its realm signed. A shutdown hands them on before the writer's
 * spool is written (`settled`, audit.area.ts); else each would come after it (lost) or never
 * (the process gone, the loss untold).
 */
export interface PendingLookups {
  /**
   * Calls `then` with what `lookup` finds; `settled` waits for both. `lookup` does not reject:
   * what a failed lookup means for the record is its caller's to say.
   */
  after<T>(lookup: Promise<T>, then: (found: T) => void): void;
  /** Once every record waiting now is handed on, after each lookup it waits for. */
  settled(): Promise<void>;
}

export function pendingLookups(): PendingLookups {
  const waiting = new Set<Promise<void>>();
  return {
    after(lookup, then) {
      const handedOn = lookup.then(then);
      waiting.add(handedOn);
      void handedOn.finally(() => waiting.delete(handedOn));
    },
    async settled() {
      // One handed on may wait for another lookup next (a token verified, then its realm's).
      while (waiting.size > 0) await Promise.allSettled(waiting);
    },
  };
}

/** What a record filed into the log of the realm it concerns needs. */
export interface RealmLogDeps {
  record: (event: AuditEvent) => void;
  /** Whether the realm has a log (`realmLogCheck`). */
  isLog: RealmLogCheck;
  /** Where the record waits for its lookups, so that a shutdown writes it. */
  pending: PendingLookups;
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
  deps: Pick<RealmLogDeps, 'record' | 'isLog' | 'pending'>,
  realm: string | undefined,
  client: string,
  eventOf: (isLog: boolean) => AuditEvent,
): void {
  recordInRealmLogs(deps, realm === undefined ? [] : [realm], client, (hasLog) => [
    eventOf(realm !== undefined && hasLog(realm)),
  ]);
}

/**
 * Records `eventsOf(hasLog)` once it is known which of `realms` have a log of their own, under
 * the rule of `recordInRealmLog` (a change naming several realms: change-events.ts).
 */
export function recordInRealmLogs(
  deps: Pick<RealmLogDeps, 'record' | 'isLog' | 'pending'>,
  realms: readonly string[],
  client: string,
  eventsOf: (hasLog: (realm: string) => boolean) => readonly AuditEvent[],
): void {
  const served = Promise.all(
    realms.map((realm) =>
      deps.isLog(realm, client).then(
        (isLog) => (isLog ? realm : undefined),
        () => undefined,
      ),
    ),
  );
  deps.pending.after(served, (logs) => {
    for (const event of eventsOf((realm) => logs.includes(realm))) deps.record(event);
  });
}
