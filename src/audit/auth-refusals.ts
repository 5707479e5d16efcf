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
  // A token no realm signed, in a spelling Keycloak may read: refused as a bad token on `/api` is.
  if (why === 'invalidToken') return 'bad_token';
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
 * up) as an `auth.request` record, once answered, as `/api` records the same refusal: with the
 * credential kind, the method, route, path, status and reason. The step reads its token
 * unverified (a reach only narrows what a token may do), and a session's id is no secret (a
 * log, a logout token, an event name it): so the record names the job credential its session
 * was issued as, and goes to the log of that session's realm (recorded at issuance; its
 * organization's administrator sees their credential used on another organization's path),
 * only once `signedBy` says the token is one that realm signed for that session. Any other (a
 * token it could not verify, more tokens than one, a reach not looked up) names none and goes,
 * as its path is public, to the log of the realm the path names (master's, naming it in
 * `details.realm`, for a realm that is no organization, or a path naming none): nobody can file
 * a record naming another organization's credential in its log. A grant at the token endpoint is
 * not recorded here: its `token.grant` record tells its refusal (token-grants.ts). The token is
 * never kept.
 */
export function auditAuthRefusals(
  deps: RealmLogDeps & {
    /** Whether `token` is one `realm` signed for the session `sessionId` (session-token.ts). */
    signedBy: (realm: string, sessionId: string, token: string, client: string) => Promise<boolean>;
  },
): TokenReachRefusalListener {
  /** The session's job credential and realm when its token is verified, else the path's realm. */
  async function attributionOf(
    req: IncomingMessage,
    refusal: TokenReachRefusal,
    address: string,
  ): Promise<{ realm: string | undefined; name: string | undefined }> {
    const { realm, sessionId, token } = refusal;
    const verified =
      realm !== undefined &&
      token !== undefined &&
      (await deps.signedBy(realm, sessionId, token, address).catch(() => false));
    return verified ? { realm, name: refusal.name } : { realm: realmNamedBy(req), name: undefined };
  }

  return (req, res, refusal) => {
    if (isRecordedGrant(req)) return;
    const { route, target, requestId } = scopeOf(req);
    const atMs = deps.clock.now();
    const address = deps.clientAddress(req);
    const eventOf = (
      realm: string | undefined,
      name: string | undefined,
      isLog: boolean,
    ): AuditEvent => ({
      org: isLog && realm !== undefined ? realm : MASTER_REALM,
      atMs,
      action: 'auth.request',
      outcome: 'failure',
      actorRealm: null,
      actorId: null,
      actorName: null,
      credential: credentialOf(req.headers.authorization),
      clientId: null,
      jobCredential: name?.slice(0, MAX_FIELD) ?? null,
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
    res.once('close', () => {
      deps.pending.after(attributionOf(req, refusal, address), ({ realm, name }) =>
        recordInRealmLog(deps, realm, address, (isLog) => eventOf(realm, name, isLog)),
      );
    });
  };
}
