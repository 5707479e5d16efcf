import { hash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Request, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import {
  LOGOUT_TOKEN_FAULTS,
  type LogoutToken,
  type LogoutTokenVerifier,
} from '../auth/bearer/logout-token.ts';
import type { Cache } from '../cache/cache.ts';
import type { Config } from '../config/config.ts';
import { scopeOf } from '../edge/request-scope.ts';
import type { Audit } from '../http/audit.ts';
import type { AccessRevocations } from './access-revocations.ts';
import { GATEWAY_CLIENT_ID } from '../keycloak/service-admin.ts';
import { apiClientIdOf } from '../tenancy/identifiers.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import { createRefusalRecordLimit } from './refusal-record-limit.ts';

/**
 * Where Keycloak posts its logout tokens, for every realm (the realm is the token's `iss`): on
 * the admin listener only, which Keycloak reaches and clients do not (app.ts).
 */
export const BACKCHANNEL_LOGOUT_PATH = '/backchannel-logout';

/**
 * How old (`iat`) a logout token may be, beyond the clock leeway: Keycloak signs it as it posts
 * it, so anything older is a replay or a clock gone wrong.
 */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 120;

/**
 * The URL Keycloak posts logout tokens to: `BACKCHANNEL_LOGOUT_URL`, else the admin listener's
 * own address (a wildcard host read as the loopback one: a Keycloak beside the gateway).
 */
export function backchannelLogoutUrlOf(
  config: Pick<Config, 'BACKCHANNEL_LOGOUT_URL' | 'ADMIN_HOST' | 'ADMIN_PORT'>,
): string {
  if (config.BACKCHANNEL_LOGOUT_URL !== undefined) return config.BACKCHANNEL_LOGOUT_URL;
  const host = config.ADMIN_HOST;
  const named =
    host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${named}:${config.ADMIN_PORT}${BACKCHANNEL_LOGOUT_PATH}`;
}

/**
 * The clients of a realm whose sessions Keycloak announces to the gateway: the API client users
 * log in with (the organization's, or master's `_platform-api`) and the gateway's own. Their
 * logout tokens are the only ones the endpoint takes (`aud`).
 */
export function backchannelClientsOf(realm: string): readonly string[] {
  return [apiClientIdOf(realm), GATEWAY_CLIENT_ID];
}

/**
 * Why a logout request is refused, a closed list (the metric's label values): a body that is
 * no form of one `logout_token` (`bad_request`), the token's faults, a `jti` seen before.
 */
export const BACKCHANNEL_REFUSALS = ['bad_request', ...LOGOUT_TOKEN_FAULTS, 'replayed'] as const;

export type BackchannelRefusal = (typeof BACKCHANNEL_REFUSALS)[number];

/** What the endpoint counts. The metrics (metrics/metrics.ts) implement it. */
export interface BackchannelMetrics {
  backchannelLogout(outcome: 'accepted' | BackchannelRefusal): void;
}

/**
 * How long the realm's token lifetime (the admin API) may hold an acknowledgement: Keycloak waits
 * for the answer while it ends the session, 5 s at most. Past it, the revocation is recorded for
 * a day, which ends nothing too early.
 */
const LIFETIME_WAIT_MS = 1000;

/** A logout request is a form of one token of about 1 KiB; far larger is refused unread. */
const MAX_BODY_BYTES = 16 * 1024;

export interface BackchannelLogoutDeps {
  verify: LogoutTokenVerifier;
  /** The revocations of a session or a user, shared with what passes through `/auth`. */
  access: Pick<AccessRevocations, 'endSessions' | 'endUser'>;
  /** Where each `jti` is marked used: Redis, shared by the replicas (else this process). */
  cache: Pick<Cache, 'increment' | 'delete'>;
  /** How long a `jti` is remembered: as long as its token's `iat` is accepted. */
  replayWindowSeconds: number;
  metrics: BackchannelMetrics;
  audit: Pick<Audit, 'record'>;
  clientAddress: (req: IncomingMessage) => string;
  logger: Logger;
  /** When a refusal of a reason was last recorded (refusal-record-limit.ts). */
  clock?: Clock;
}

/**
 * `POST /backchannel-logout` (OpenID Connect Back-Channel Logout 1.0): Keycloak tells the
 * gateway a session (`sid`) or a user's every session (`sub` alone) ended. A valid token, used
 * once, ends what it names on every replica through the shared revocation list, and only then
 * is 200 answered; anything else is 400 `{"error":"invalid_request"}`, counted and audited, and
 * ends nothing. The token is never logged.
 */
export function backchannelLogout(deps: BackchannelLogoutDeps): RequestHandler {
  const readBody = express.raw({ type: () => true, limit: MAX_BODY_BYTES, inflate: false });
  const windowMs = Math.max(deps.replayWindowSeconds, 1) * 1000;
  const recordable = createRefusalRecordLimit(deps.clock ?? systemClock);

  function refuse(req: IncomingMessage, res: ServerResponse, reason: BackchannelRefusal): void {
    deps.metrics.backchannelLogout(reason);
    const { recorded, ended } = recordable.take(reason);
    if (recorded) {
      // The reasons are a closed list, far below the cap on keys: a run ended is this reason's.
      const unrecorded = ended[0]?.count ?? 0;
      const suppressed: Record<string, string> =
        unrecorded > 0 ? { suppressed: String(unrecorded) } : {};
      deps.logger.warn({ reason, ...suppressed }, 'back-channel logout token refused');
      deps.audit.record({
        action: 'backchannel_logout.apply',
        outcome: 'failure',
        target: { reason, ...suppressed },
        clientAddress: deps.clientAddress(req),
        requestId: scopeOf(req).requestId,
      });
    }
    answer(res, 400, '{"error":"invalid_request"}');
  }

  /** Where the issuer's `jti` is marked used, on every replica. */
  const usedKey = (token: LogoutToken) =>
    `backchannel-jti:${hash('sha256', `${token.issuer}\u0000${token.tokenId}`, 'base64url')}`;

  /** True the first time the issuer's `jti` is seen within the window, on any replica. */
  async function firstUse(token: LogoutToken): Promise<boolean> {
    return (await deps.cache.increment(usedKey(token), windowMs)).count === 1;
  }

  async function end(token: LogoutToken): Promise<void> {
    const { realm, sessionId, userId } = token;
    const revoke = sessionId
      ? await deps.access.endSessions(realm, [sessionId], userId, LIFETIME_WAIT_MS)
      : await deps.access.endUser(realm, userId!, true, LIFETIME_WAIT_MS);
    await revoke();
  }

  async function serve(req: Request, res: ServerResponse): Promise<void> {
    const body: unknown = req.body;
    const fields =
      Buffer.isBuffer(body) && req.is('application/x-www-form-urlencoded')
        ? new URLSearchParams(body.toString('latin1')).getAll('logout_token')
        : [];
    if (fields.length !== 1) return refuse(req, res, 'bad_request');
    const verdict = await deps.verify(fields[0]!, deps.clientAddress(req));
    if ('refused' in verdict) return refuse(req, res, verdict.refused);
    const { token } = verdict;
    if (!(await firstUse(token))) return refuse(req, res, 'replayed');
    try {
      await end(token);
    } catch (err) {
      // The ending failed: the same token sent again (by Keycloak, by an operator) is no replay.
      await deps.cache.delete(usedKey(token)).catch(() => undefined);
      throw err;
    }
    deps.metrics.backchannelLogout('accepted');
    deps.audit.record({
      action: 'backchannel_logout.apply',
      outcome: 'success',
      target: {
        realm: token.realm,
        ...(token.sessionId && { session: token.sessionId }),
        ...(token.userId && { user: token.userId }),
      },
      clientAddress: deps.clientAddress(req),
      requestId: scopeOf(req).requestId,
    });
    answer(res, 200, '');
  }

  return (req, res, next) => {
    readBody(req, res, (err?: unknown) => {
      // Too large, or a body that could not be read: no logout request.
      if (err) refuse(req, res, 'bad_request');
      else serve(req, res).catch(next);
    });
  };
}

/** Section 2.8: the answer is not cached; a refusal says `invalid_request`. */
function answer(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    'cache-control': 'no-store',
    ...(body && { 'content-type': 'application/json' }),
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}
