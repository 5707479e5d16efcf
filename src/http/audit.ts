import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { Principal } from '../tenancy/principal.ts';
import { scopeOf } from '../edge/request-scope.ts';
import { AppError } from '../envelope/errors.ts';

/**
 * One audit line: who did what to which target, the outcome, from where, in which request.
 * Targets name things (realms, users, sessions, fields), never a secret.
 */
export interface AuditEntry {
  /** `<thing>.<verb>`, e.g. `refresh_tokens.revoke_all`, `user.create`, `login_throttle.start`. */
  action: string;
  outcome: 'success' | 'failure';
  /** The result code of a failure. */
  result?: string;
  /** Why it failed, when no result code says it: `ANSWER_CUT` (see `AnswerCut`). */
  reason?: string;
  /** The authenticated caller; absent for events no one authenticated caused (a throttle). */
  actor?: { realm: string; userId: string; username: string };
  target: Record<string, string | string[]>;
  /**
   * The realms a change of several at once changed (a platform-wide setting): names from
   * Keycloak, not the client's, each given the record in its own log (audit/change-events.ts).
   */
  realms?: readonly string[];
  clientAddress: string;
  requestId?: string;
}

export interface Audit {
  /** Wraps a route handler so that its outcome, success or failure, becomes one audit line. */
  route(
    action: string,
    target: (req: Request) => AuditEntry['target'],
    handler: (req: Request, res: Response) => Promise<void>,
    realms?: (req: Request) => readonly string[] | undefined,
  ): RequestHandler;
  /** An event that is not the outcome of an audited route. */
  record(entry: AuditEntry): void;
  /** Every line from now on is handed to `sink` too (the audit log, src/audit/). */
  keepIn(sink: (entry: AuditEntry) => void): void;
}

/**
 * The names a `token_lifetimes.change` target gives an organization's DPoP switch before and
 * after the change, when the body set it: the audit log records a switch as a change of its own
 * (audit/change-events.ts).
 */
export const DPOP_BEFORE = 'dpop_required_before';
export const DPOP_AFTER = 'dpop_required';

/**
 * A streamed answer stopped after its headers were sent: it failed midway, or its client left
 * or held it back too long. The client holds part of it (lines that end whole, so a file
 * that looks complete): an audited route records that as a failure, not a success. `result`:
 * the failure's code when the gateway cut it, none when the client went.
 */
export class AnswerCut extends Error {
  readonly result: string | undefined;
  constructor(message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.result =
      cause === undefined ? undefined : cause instanceof AppError ? cause.result : '500-99999';
  }
}

/** The reason of a failure whose answer did not all reach its client (`AnswerCut`). */
export const ANSWER_CUT = 'answer_cut';

/** Longest value written; longer ones (from hostile bodies, a client's URL) are cut. */
const MAX_VALUE = 255;

/**
 * Audit lines go to the log as JSON with `"audit": true`, so they can be shipped and kept apart
 * from the access log. `clientAddress` is the edge's view of the client (trusted proxies).
 */
export function createAudit(
  logger: Logger,
  clientAddress: (req: IncomingMessage) => string,
): Audit {
  const log = logger.child({ audit: true });
  let sink: ((entry: AuditEntry) => void) | undefined;
  // Every entry, a route's or an event's: a throttle's names what a client typed (a realm, a
  // user name), at any length.
  const record = (sent: AuditEntry) => {
    const entry = boundedEntry(sent);
    log.info(entry, `audit ${entry.action} ${entry.outcome}`);
    sink?.(entry);
  };

  return {
    record,
    keepIn(kept) {
      sink = kept;
    },
    route(action, target, handler, realms) {
      return async (req, res) => {
        const scope = scopeOf(req);
        const entry = () => {
          const changed = realms?.(req);
          return {
            action,
            actor: actorOf(scope.principal),
            target: target(req),
            ...(changed && { realms: changed }),
            clientAddress: clientAddress(req),
            requestId: scope.requestId,
          };
        };
        try {
          await handler(req, res);
        } catch (err) {
          if (err instanceof AnswerCut) {
            record({ ...entry(), outcome: 'failure', result: err.result, reason: ANSWER_CUT });
            throw err;
          }
          const result = err instanceof AppError ? err.result : '500-99999';
          record({ ...entry(), outcome: 'failure', result });
          throw err;
        }
        record({ ...entry(), outcome: 'success' });
      };
    },
  };
}

function actorOf(principal: Principal | undefined): AuditEntry['actor'] {
  return (
    principal && {
      realm: principal.realm,
      userId: principal.userId,
      username: principal.username,
    }
  );
}

const cut = (value: string) => value.slice(0, MAX_VALUE);

/** `entry` with each of its values, and each list of its target, cut to what is written. */
function boundedEntry(entry: AuditEntry): AuditEntry {
  const { actor, result, reason, realms, requestId } = entry;
  return {
    ...entry,
    action: cut(entry.action),
    ...(result !== undefined && { result: cut(result) }),
    ...(reason !== undefined && { reason: cut(reason) }),
    ...(actor && {
      actor: { realm: cut(actor.realm), userId: cut(actor.userId), username: cut(actor.username) },
    }),
    target: Object.fromEntries(
      Object.entries(entry.target).map(([key, value]) => [
        cut(key),
        Array.isArray(value) ? value.slice(0, 100).map(cut) : cut(value),
      ]),
    ),
    // Each realm a change changed is given its record: a list from Keycloak, not cut short.
    ...(realms && { realms: realms.map(cut) }),
    clientAddress: cut(entry.clientAddress),
    ...(requestId !== undefined && { requestId: cut(requestId) }),
  };
}

/** A string field of a JSON body as a target value, or nothing when it is not a string. */
export function bodyField(body: unknown, name: string): Record<string, string> {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' ? { [name]: value } : {};
}
