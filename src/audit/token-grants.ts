import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import { parseBasicCredentials } from '../auth/basic/parse-basic.ts';
import { JOB_FIELDS } from '../auth-proxy/job-credentials.ts';
import { receivedFormFieldsOf } from '../auth-proxy/form-body-guard.ts';
import { authEntryOf } from '../auth-proxy/auth-routes.ts';
import { scopeOf } from '../edge/request-scope.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { MAX_FIELD } from './api-decisions.ts';
import type { AuditEvent } from './audit-writer.ts';
import { recordInRealmLog, type RealmLogDeps } from './realm-log.ts';

/** Why Keycloak (or a step before it) refused a grant, by the status answered. */
export const REASON_OF_STATUS: Record<number, string> = {
  400: 'invalid_request',
  401: 'wrong_credentials',
  403: 'refused',
  429: 'throttled',
};

/**
 * The token endpoint's step that records each grant through `/auth` once it is answered: its
 * realm's log (master's for a realm that is no organization), success or failure and the status
 * (a success only when its answer reached the client: else `not_delivered`),
 * the grant type, the client (from the form, or the id of its Basic client authentication), the
 * user name of a password grant and the job credential's fields. Chosen fields of the form only:
 * never a password, a secret, a code, a token, a one-time password or a proof. It runs before
 * the form is read (auth-steps.ts), so a grant whose body the gateway refuses is recorded too,
 * with no field of its form.
 */
export function auditTokenGrants(deps: RealmLogDeps): RequestHandler {
  return (req, res, next) => {
    const realm = scopeOf(req).route.realm;
    if (!isRecordedGrant(req) || realm === undefined) {
      next();
      return;
    }
    const atMs = deps.clock.now();
    const address = deps.clientAddress(req);
    res.once('close', () => {
      // 'close' comes as well when the client hung up (or the connection was cut) before the
      // answer was all sent: then nobody got the tokens Keycloak may have issued, whatever
      // status was set (a head may be written by then: test/integration/audit-grant-hangup
      // saw 200 with headersSent), so it is no status the client got. Read now, at 'close'.
      const delivered = res.writableFinished;
      const answer: Answer = { delivered, status: delivered ? res.statusCode : null };
      // The form as sent, read once this step has passed it on (it comes before the form's
      // reader, so that a body the reader refuses is a failed grant too): none then.
      const form = receivedFormFieldsOf(req);
      recordInRealmLog(deps, realm, address, (isLog) =>
        grantEvent(req, answer, form, realm, isLog, atMs, address),
      );
    });
    next();
  };
}

/**
 * Whether `req` is a grant `auditTokenGrants` records (a POST to an entry that names its step,
 * the token endpoint): what any step refuses of it is told in its `token.grant` record.
 */
export function isRecordedGrant(req: IncomingMessage): boolean {
  return (
    req.method === 'POST' && authEntryOf(scopeOf(req).route)?.steps.includes('auditGrant') === true
  );
}

/** What the client got: `delivered` when the whole answer was sent, and then its status. */
interface Answer {
  delivered: boolean;
  status: number | null;
}

/** The reason of a grant whose answer did not reach its client (it hung up, or was cut). */
export const NOT_DELIVERED = 'not_delivered';

function grantEvent(
  req: IncomingMessage,
  { delivered, status }: Answer,
  form: URLSearchParams | undefined,
  realm: string,
  isLog: boolean,
  atMs: number,
  address: string,
): AuditEvent {
  const field = (name: string) => form?.get(name)?.slice(0, MAX_FIELD) ?? undefined;
  const grantType = field('grant_type');
  const details: Record<string, string | string[]> = {};
  if (grantType !== undefined) details.grantType = grantType;
  if (!isLog) details.realm = realm.slice(0, MAX_FIELD);
  const workspaces = form?.getAll(JOB_FIELDS.workspaces);
  if (workspaces && workspaces.length > 0) {
    details.jobWorkspaces = workspaces
      .flatMap((value) => value.split(','))
      .slice(0, 100)
      .map((id) => id.trim().slice(0, MAX_FIELD));
  }
  const readOnly = field(JOB_FIELDS.readOnly);
  if (readOnly !== undefined) details.jobReadOnly = readOnly;
  const expiresIn = field(JOB_FIELDS.expiresIn);
  if (expiresIn !== undefined) details.jobExpiresIn = expiresIn;
  const success = delivered && status === 200;
  return {
    org: isLog ? realm : MASTER_REALM,
    atMs,
    action: 'token.grant',
    outcome: success ? 'success' : 'failure',
    actorRealm: realm.slice(0, MAX_FIELD),
    actorId: null,
    actorName: grantType === 'password' ? (field('username') ?? null) : null,
    credential: null,
    clientId: field('client_id') ?? basicClientId(req.headers.authorization),
    jobCredential: field(JOB_FIELDS.name) ?? null,
    jkt: null,
    method: 'POST',
    route: scopeOf(req).route.entry?.path ?? null,
    path: scopeOf(req).target.path.slice(0, MAX_FIELD),
    workspace: null,
    status,
    result: null,
    reason: success ? null : reasonOf(delivered, status),
    address,
    requestId: scopeOf(req).requestId,
    details,
  };
}

function reasonOf(delivered: boolean, status: number | null): string {
  if (!delivered || status === null) return NOT_DELIVERED;
  return REASON_OF_STATUS[status] ?? `status_${status}`;
}

/** The client id of a Basic client authentication (RFC 6749 2.3.1), never its secret. */
function basicClientId(authorization: string | undefined): string | null {
  const match = authorization && /^\s*basic\s+(.*)$/i.exec(authorization);
  if (!match) return null;
  const credentials = parseBasicCredentials(match[1]!);
  if ('invalid' in credentials) return null;
  try {
    return decodeURIComponent(credentials.username).slice(0, MAX_FIELD);
  } catch {
    return credentials.username.slice(0, MAX_FIELD);
  }
}
