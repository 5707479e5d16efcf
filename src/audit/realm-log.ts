import type { IncomingMessage } from 'node:http';
import type { Clock } from '../time/clock.ts';
import type { AuditEvent } from './audit-writer.ts';

/** What the `/auth` records need to file an event into the log of the realm it concerns. */
export interface RealmLogDeps {
  record: (event: AuditEvent) => void;
  /** Whether the realm's log exists: master, or an organization's. */
  isLog: (realm: string, client: string) => Promise<boolean>;
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
