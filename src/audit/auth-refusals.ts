import type { IncomingMessage } from 'node:http';
import type {
  TokenReachRefusal,
  TokenReachRefusalListener,
} from '../auth-proxy/token-reach-guard.ts';
import { scopeOf } from '../edge/request-scope.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { credentialOf, MAX_FIELD, reasonOfCode } from './api-decisions.ts';
import type { AuditEvent } from './audit-writer.ts';
import { recordInRealmLog, type RealmLogDeps } from './realm-log.ts';
import { isRecordedGrant } from './token-grants.ts';

/** A refusal's reason, named as the same refusal on `/api` is (docs/audit.md). */
function reasonOf({ why }: TokenReachRefusal): string {
  if (why === 'expired') return 'expired';
  // More tokens than a request carries: no credential the gateway could read.
  if (why === 'tooManyTokens') return 'malformed';
  return reasonOfCode(why);
}

/**
 * The realm an `/auth` path names: its entry's `{realm}` (below `/auth/realms/`), else the one
 * Keycloak's admin API names (`/auth/admin/realms/{realm}/...`, whose fallback entry reads no
 * realm); none for any other path.
 */
function realmNamedBy(req: IncomingMessage): string | undefined {
  const { route, target } = scopeOf(req);
  if (route.realm !== undefined) return route.realm;
  const [, area, realms, realm] = target.segments;
  return area?.toLowerCase() === 'admin' && realms === 'realms' ? realm : undefined;
}

/**
 * Records each `/auth` request the reach step refused (token-reach-guard.ts: a job credential's
 * token outside its reach, past its lifetime, more tokens than one, a reach it could not look
 * up) as an `auth.request` record, once answered, as `/api` records the same refusal: into the
 * log of the realm of the token's session (recorded at issuance, so its own organization's
 * whatever realm the path names), else, for a token whose session is unknown (more tokens than
 * one, a reach not looked up), of the realm the path names (master's, naming it in
 * `details.realm`, for a realm that is no organization, or a path naming none), with the
 * credential kind, the job credential's name, the method, route, path, status and reason. A
 * grant at the token endpoint is not: its `token.grant` record tells its refusal
 * (token-grants.ts). Its token is read unverified and never kept: only the name and realm its
 * session was given at issuance.
 */
export function auditAuthRefusals(deps: RealmLogDeps): TokenReachRefusalListener {
  return (req, res, refusal) => {
    if (isRecordedGrant(req)) return;
    const { route, target, requestId } = scopeOf(req);
    // Its organization's administrator is the one to see a job credential misused, whatever
    // realm the path names.
    const realm = refusal.realm ?? realmNamedBy(req);
    const atMs = deps.clock.now();
    const address = deps.clientAddress(req);
    const eventOf = (isLog: boolean): AuditEvent => ({
      org: isLog && realm !== undefined ? realm : MASTER_REALM,
      atMs,
      action: 'auth.request',
      outcome: 'failure',
      actorRealm: null,
      actorId: null,
      actorName: null,
      credential: credentialOf(req.headers.authorization),
      clientId: null,
      jobCredential: refusal.name?.slice(0, MAX_FIELD) ?? null,
      jkt: null,
      method: req.method ?? null,
      route: route.entry?.path ?? null,
      path: target.path.slice(0, MAX_FIELD),
      workspace: null,
      status: res.statusCode,
      result: null,
      reason: reasonOf(refusal),
      address,
      requestId,
      details: isLog || realm === undefined ? {} : { realm: realm.slice(0, MAX_FIELD) },
    });
    res.once('close', () => recordInRealmLog(deps, realm, address, eventOf));
  };
}
