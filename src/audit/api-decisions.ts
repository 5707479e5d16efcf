import type { IncomingMessage, ServerResponse } from 'node:http';
import { AuthFailure } from '../auth/auth-failure.ts';
import { parseBasicCredentials } from '../auth/basic/parse-basic.ts';
import type { RequestScope } from '../edge/request-scope.ts';
import { toAppError } from '../envelope/error-handler.ts';
import { ANSWER_CUT } from '../http/audit.ts';
import { AppError, type ErrorCode } from '../envelope/errors.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Clock } from '../time/clock.ts';
import type { AuditEvent } from './audit-writer.ts';

/** Longest string field kept from what a client sent (a user name tried, a path of the gateway's). */
export const MAX_FIELD = 255;

/** Refusals whose reason is their result code's name, said the way docs/audit.md lists them. */
const REASON_OF_CODE: Partial<Record<ErrorCode, string>> = {
  tooManyFailedLogins: 'throttled',
  outsideTokenReach: 'out_of_reach',
  readOnlyToken: 'read_only',
  permissionDenied: 'missing_role',
  organizationNotFound: 'unknown_organization',
  organizationDisabled: 'organization_disabled',
  workspaceNotFound: 'unknown_workspace',
};

/** The reason of a refusal answered with `code`, as docs/audit.md lists it. */
export function reasonOfCode(code: ErrorCode): string {
  return REASON_OF_CODE[code] ?? code;
}

/** Why the admission refused: the authentication's reason, else the refusal's own. */
export function reasonOf(err: unknown): string {
  if (err instanceof AppError) {
    if (err.cause instanceof AuthFailure) return err.cause.reason;
    return reasonOfCode(err.code);
  }
  return 'unexpected';
}

/** The details of an `/api` decision that names no other organization: one, never changed. */
const NO_DETAILS: Record<string, string> = Object.freeze({});

/** The scheme of an Authorization header, as the audit log names it. */
export function credentialOf(authorization: string | undefined): string {
  if (authorization === undefined) return 'none';
  // The usual header, read without a pattern: this runs on every `/api` request.
  if (authorization.startsWith('Bearer ')) return 'bearer';
  if (authorization.trim() === '') return 'none';
  const scheme = /^\s*([A-Za-z]+)/.exec(authorization)?.[1]?.toLowerCase();
  return scheme === 'basic' || scheme === 'bearer' || scheme === 'dpop' ? scheme : 'other';
}

/**
 * The record of one `/api` decision, once its answer is sent (or the client has gone): who
 * called (the admitted caller, or the one refused after its credentials were verified; for a
 * refused Basic login the user name tried), with which
 * credential kind, client, job credential, token (its `jti`, hashed by the writer) and key, on
 * which route and workspace, and what came of it: the status, and for a refusal its result code
 * and reason. Nothing is copied from the request but the path of a gateway's own route (ids it
 * chose, nothing secret) and a user name tried; never a header's value, a body or a query. A
 * forwarded call keeps its route and workspace, not its path: below the route it is the
 * upstream's, which may carry a secret in a segment (a webhook's token, a signed part), and the
 * log would hand it to every reader and export.
 *
 * It goes to the log of the realm the path names; a refusal of an organization not known to
 * exist goes to master's (anyone can name one: it must not make a log). Known: `isKnown`, what
 * this process holds of the organizations (organization-directory.ts) without asking the
 * database; an organization the admission found absent is not, nor one it could not look up
 * (the database down or its lookups spent: refused 503, and a flood of made-up ids would
 * otherwise make a log each once the database is back). An organization the admission let past
 * its first step (a refusal of the caller's credentials, its reach, its role) is known.
 */
export function apiDecisionOf(
  req: IncomingMessage,
  res: ServerResponse,
  scope: RequestScope,
  clientAddress: string,
  clock: Clock,
  isKnown: (organization: string) => boolean,
): AuditEvent | undefined {
  const { principal, route } = scope;
  if (principal === undefined && scope.refusal === undefined) return undefined;
  const refused = principal === undefined;
  // Admitted, or verified and then refused (its reach, a role): named either way.
  const caller = principal ?? scope.refusedCaller;
  // As answered: a database error the admission met is the 503 the client was told.
  const refusal = refused ? toAppError(scope.refusal) : undefined;
  // Admitted, but its answer did not all reach the client: it went, or the gateway cut it (a
  // streamed answer failing midway: `cutResult`). The client holds part of it, or nothing.
  const cut = !refused && !res.writableFinished;
  const org =
    route.realm === undefined ||
    (refused &&
      route.organization !== undefined &&
      (refusal!.code === 'organizationNotFound' || !isKnown(route.organization)))
      ? MASTER_REALM
      : route.realm;
  const authorization = req.headers.authorization;
  return {
    org,
    atMs: clock.now(),
    action: 'api.request',
    outcome: refused || cut || res.statusCode >= 400 ? 'failure' : 'success',
    actorRealm: caller?.realm ?? null,
    actorId: caller?.userId ?? null,
    actorName: caller?.username ?? (refused ? basicUserTried(authorization) : null),
    credential: credentialOf(authorization),
    clientId: caller?.clientId ?? null,
    jobCredential: caller?.reach?.name ?? null,
    tokenId: caller?.tokenId,
    jkt: caller?.boundKey ?? null,
    method: req.method ?? null,
    route: route.entry?.path ?? null,
    path: route.entry?.forwarded ? null : scope.target.path.slice(0, MAX_FIELD),
    workspace: route.workspace ?? null,
    // Before its head is sent, statusCode is Node's default 200, nothing anyone answered.
    status: res.headersSent || res.writableFinished ? res.statusCode : null,
    result: refusal?.result ?? scope.cutResult ?? null,
    reason: refused ? reasonOf(refusal) : cut ? ANSWER_CUT : null,
    address: clientAddress,
    requestId: scope.requestId,
    details:
      org === route.realm || route.organization === undefined
        ? NO_DETAILS
        : { organization: route.organization.slice(0, MAX_FIELD) },
  };
}

/** The user name of a Basic header (never its password); null for any other. */
function basicUserTried(authorization: string | undefined): string | null {
  const match = authorization && /^\s*basic\s+(.*)$/i.exec(authorization);
  if (!match) return null;
  const credentials = parseBasicCredentials(match[1]!);
  return 'invalid' in credentials ? null : credentials.username.slice(0, MAX_FIELD);
}
