import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { revokeRealmWide, type RealmWideScope, type RevocationList } from '../auth/revocation.ts';
import type { BearerVerifier } from '../auth/bearer/bearer-verifier.ts';
import type { IdTokenSession } from '../auth/bearer/id-token.ts';
import { scopeOf } from '../edge/request-scope.ts';
import { authEntryOf, endingOf } from './auth-routes.ts';
import { ENDING_RULES, type Ending, type RoleRef } from './access-endings.ts';
import { beforeAnswer } from './auth-proxy.ts';
import type { AnswerBody } from './hooked-answer.ts';
import { sendTokenError } from './grant-answer.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { utf8JsonTextOf } from './utf8-body.ts';
import { refreshTokenSession } from './refresh-token-claims.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import type { AccessRevocations, PreparedRevocation } from './access-revocations.ts';

/**
 * The admin API's user and realm updates, read to see what they change: a few KiB, more with
 * attributes or localized texts, never this much (larger ones get 413).
 */
const MAX_JSON_BYTES = 8 * 1024 * 1024;

/** How a JSON body Keycloak would read in another encoding than UTF-8 is refused. */
export const JSON_NOT_UTF8 = {
  error: 'invalid_request',
  error_description: 'JSON body must be UTF-8.',
} as const;

export interface EndAccessDeps {
  revocations: RevocationList;
  /** Verifies an access token of the realm: a `revoke` of one refuses that token alone. */
  bearer: Pick<BearerVerifier, 'verify'>;
  /** The session of an ID token the realm signed (id-token.ts), if it is one. */
  idTokenSession: (
    realm: string,
    token: string,
    client?: string,
  ) => Promise<IdTokenSession | undefined>;
  /**
   * The client's address: a token it names spends that client's share of the organization
   * lookups when its realm's key set is not held (jwks.ts).
   */
  clientAddress: (req: IncomingMessage) => string;
  /**
   * The ids of the members of a group and of the groups below it (Keycloak's admin API), read
   * before the group changes; undefined when they are more than a bounded number of reads find.
   */
  groupMembers: (realm: string, groupId: string) => Promise<string[] | undefined>;
  /**
   * The role a path names, as tokens name it (`client`: the client id, absent for a realm role);
   * undefined when there is none. Read before the role is deleted.
   */
  roleOf: (realm: string, role: RoleRef) => Promise<{ client?: string; name: string } | undefined>;
  /**
   * The roles of a client (by its UUID) as tokens name them; none when there is no such client.
   * Read before the client is deleted.
   */
  clientRolesOf: (realm: string, clientUuid: string) => Promise<{ client: string; name: string }[]>;
  /**
   * Whether Keycloak's admin API might admit the request (admin-caller.ts): the admin API's
   * changes are read about before forwarding only then.
   */
  mayBeAdmitted: (req: IncomingMessage, realm: string, client?: string) => Promise<boolean>;
  /** The revocations of a session or a user, shared with the back-channel logout. */
  access: AccessRevocations;
  leewaySeconds: number;
  /** The realm's key providers changed: its key set is fetched again. */
  onKeyProvidersChanged: (realm: string) => Promise<void>;
  /**
   * The user was given a new password: the wrong passwords the login throttle remembers of them
   * are dropped (the new password may be one of them).
   */
  onPasswordSet: (realm: string, userId: string) => Promise<void>;
  logger: Logger;
  clock?: Clock;
}

/**
 * The `/auth` step that makes what a request ends in Keycloak end at the gateway at once, on
 * every replica: it takes the ending rule the request's `/auth` entry carries (access-endings.ts;
 * the edge matched the entry, auth-routes.ts), prepares what it would end before forwarding
 * (verifying the tokens it names), and applies it through the shared revocation list when
 * Keycloak answers success, before the client gets that answer. Keycloak's refusal ends nothing.
 * Mount it after the form guard, before the proxy.
 */
export function endAccessOnSuccess(deps: EndAccessDeps): RequestHandler {
  const { clock = systemClock } = deps;
  // Read as sent (no inflating): the proxy forwards these bytes with the client's headers.
  const readJson = express.raw({
    type: 'application/json',
    limit: MAX_JSON_BYTES,
    inflate: false,
  });
  const { access } = deps;
  const { tokenLifetimeOf, basicSeconds, endSessions } = access;

  /** The realm-wide refusal `scope` names, its lifetime read now (revocation.ts). */
  async function realmWide(realm: string, scope: RealmWideScope): Promise<() => Promise<void>> {
    const bounds = { tokenTtlSeconds: await tokenLifetimeOf(realm), basicSeconds };
    return () => revokeRealmWide(deps.revocations, realm, scope, bounds);
  }

  /** What `ending` will do once Keycloak has said yes; undefined when nothing it names is trusted. */
  async function prepare(
    ending: Ending,
    client: string,
  ): Promise<(() => Promise<void>) | undefined> {
    const { realm } = ending;
    switch (ending.kind) {
      case 'session':
        return endSessions(realm, [ending.sessionId]);
      case 'user': {
        const { userId } = ending;
        const endUser = await access.endUser(realm, userId, ending.tokens);
        return async () => {
          await endUser();
          if (ending.passwordSet) await deps.onPasswordSet(realm, userId);
        };
      }
      case 'group': {
        // A failed read refuses the change (next(err)): it would end nobody's tokens.
        const members = await deps.groupMembers(realm, ending.groupId);
        // Too many to read before forwarding: every token of the realm from before now is
        // refused, theirs among them (each client refreshes once), as a realm-wide logout does.
        if (!members) return realmWide(realm, { wholeRealm: true });
        return members.length > 0 ? access.endUsers(realm, members) : undefined;
      }
      case 'role': {
        // A failed read refuses the deletion (next(err)): it would end no token.
        const role = await deps.roleOf(realm, ending.role);
        if (!role) return undefined;
        return realmWide(realm, { endedRoles: [role] });
      }
      case 'composite': {
        // Read before, as for a deletion: a failed read refuses the change (next(err)), which
        // would leave the composite's holders their tokens' copies.
        const endedRoles = [];
        for (const id of ending.roleIds) {
          const role = await deps.roleOf(realm, { id });
          if (role) endedRoles.push(role);
        }
        return endedRoles.length > 0 ? realmWide(realm, { endedRoles }) : undefined;
      }
      case 'client': {
        // A failed read refuses the deletion (next(err)): it would end no token.
        const endedRoles = await deps.clientRolesOf(realm, ending.clientUuid);
        return endedRoles.length > 0 ? realmWide(realm, { endedRoles }) : undefined;
      }
      case 'realm': {
        // Applied even when the not-before is older than today's lifetime (any realm update
        // carries it): a token issued under a longer lifetime may still be alive, on this
        // replica or another. Each replica keeps the refusal as long as the tokens it serves
        // need (revocation.ts), and keeps nothing when none of them can be alive.
        return realmWide(realm, { wholeRealm: true, at: ending.notBefore });
      }
      case 'keys':
        return () => deps.onKeyProvidersChanged(realm);
      case 'logout': {
        // A refresh token is HMAC-signed with a key only Keycloak holds: its claims are read
        // unverified, and trusted only because Keycloak's success says it verified the token
        // (signature, active session, issued to the authenticated client); a bad one is refused.
        // An ID token hint the gateway verifies itself against the realm's key set.
        const session = ending.refreshToken
          ? refreshTokenSession(ending.refreshToken)
          : await deps.idTokenSession(realm, ending.idTokenHint ?? '', client);
        return session && endSessions(realm, [session.sessionId], session.userId);
      }
      case 'revoke':
        return revokeToken(realm, ending.token, client);
    }
  }

  /**
   * RFC 7009. An access token the gateway verifies itself is refused alone (by its `jti`), as
   * Keycloak revokes it. A refresh or offline token is HMAC-signed with a key only Keycloak
   * holds: its claims are read unverified, and trusted only because Keycloak's success says it
   * verified the token, issued to the client that authenticated, of a valid session, and ended
   * that client's part of the session (its other clients' tokens live on): the access tokens of
   * that session and client issued before now are refused. Keycloak's answer to a token it does
   * not accept is no success (access-endings.ts).
   */
  async function revokeToken(realm: string, token: string, client: string) {
    // A refusal, thrown at once or later, means it is no access token of ours.
    const principal = await Promise.resolve()
      .then(() => deps.bearer.verify(realm, token, undefined, client))
      .catch(() => undefined);
    if (!principal) return endClientSession(realm, token);
    const tokenId = principal.tokenId;
    if (!tokenId) return undefined;
    const ttlSeconds =
      Math.max(principal.expiresAt - Math.floor(clock.now() / 1000), 0) + deps.leewaySeconds + 1;
    return () =>
      deps.revocations.revoke({
        realm,
        userId: principal.userId,
        sessionIds: [],
        tokenIds: [tokenId],
        ttlSeconds,
        userTtlSeconds: 0,
      });
  }

  async function endClientSession(realm: string, refreshToken: string) {
    const claims = refreshTokenSession(refreshToken);
    if (!claims?.clientId) return undefined;
    const ttlSeconds = await tokenLifetimeOf(realm);
    const clientSessions = [{ sessionId: claims.sessionId, clientId: claims.clientId }];
    return () =>
      deps.revocations.revoke({
        realm,
        userId: claims.userId ?? '',
        sessionIds: [],
        clientSessions,
        ttlSeconds,
        userTtlSeconds: 0,
      });
  }

  /**
   * Once, whenever called first: every replica told the realm's former lifetime (`keep`). A
   * failure is logged: the change goes on, and a refusal after it lasts as long as today's.
   */
  function keepingOnce(realm: string, keep: PreparedRevocation): () => Promise<void> {
    let kept: Promise<void> | undefined;
    return () =>
      (kept ??= keep().catch((err: unknown) => {
        deps.logger.error(
          { err, realm },
          "could not tell the replicas the realm's former lifetime",
        );
      }));
  }

  /** Watches what the request ends; true when it answered the request itself (a refusal). */
  async function watch(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const { route, target } = scopeOf(req);
    const rule = endingOf(route)!;
    const { query } = target;
    // Keycloak refuses it (401): nothing to read about, whatever its body names.
    if (
      authEntryOf(route)!.path.startsWith('/auth/admin/') &&
      !(await deps.mayBeAdmitted(req, route.realm!, deps.clientAddress(req)))
    ) {
      return false;
    }
    // Read before Keycloak changes anything, as the realmgate API's change of the lifetimes does.
    const keepLifetime =
      rule.changesLifetimes && route.realm !== undefined
        ? keepingOnce(route.realm, await access.keepFormerLifetime(route.realm))
        : undefined;
    const ending = rule.endingOf({
      query: new URLSearchParams(query),
      form: formFieldsOf(req),
      json: jsonOf(req),
    });
    if (ending?.kind === 'composite' && ending.roleIds.length > MAX_ROLES_TAKEN) {
      sendTokenError(res, TOO_MANY_ROLES);
      return true;
    }
    const end = ending && (await prepare(ending, deps.clientAddress(req)));
    // Whether Keycloak answered, and how.
    let answered: number | undefined;
    if (keepLifetime) {
      // When Keycloak never answers (a timeout), kept once the request is over: the change may be
      // in effect all the same.
      res.once('close', () => {
        if (answered === undefined) void keepLifetime();
      });
    }
    if (!keepLifetime && (!ending || !end)) return false;
    const hook = async (status: number, body: AnswerBody | undefined) => {
      answered = status;
      // Kept before its client hears Keycloak's answer, unless that is a refusal (4xx: nothing
      // changed). Anyone who reaches the admin listener may send such a request without
      // credentials, naming any realm: kept, each would cost every replica a day's entry.
      if (status < 400 || status >= 500) await keepLifetime?.();
      if (!ending || !end || !rule.succeeded(status, body)) return;
      try {
        await end();
        deps.logger.info(
          { ending: ending.kind, realm: ending.realm },
          'access ended in Keycloak ended at the gateway',
        );
      } catch (err) {
        deps.logger.error(
          { err, ending: ending.kind, realm: ending.realm },
          'could not apply what Keycloak ended',
        );
      }
    };
    beforeAnswer(req, hook, {
      readsBody: rule.readsAnswer,
      ...(rule.answerMarker && { marker: rule.answerMarker }),
    });
    return false;
  }

  return (req, res, next) => {
    const { route } = scopeOf(req);
    const rule = endingOf(route);
    if (!rule) {
      next();
      return;
    }
    // HEAD finds the GET's entry (the logout's), and Keycloak runs its GET for it (JAX-RS),
    // ending what it names; but its answer has no page to tell an ending from its confirmation
    // page (`loggedOut`), so the tokens would live on. No client needs a HEAD of it.
    if (req.method === 'HEAD') {
      res.setHeader('allow', methodsOf(authEntryOf(route)!.path));
      sendTokenError(res, HEAD_OF_ENDING);
      return;
    }
    const go = () => {
      watch(req, res).then((answered) => {
        if (!answered) next();
      }, next);
    };
    // A compressed body (no console sends one) is not read: it streams through, and what it
    // changes is left to the re-check.
    const encoding = req.headers['content-encoding'];
    const readable = encoding === undefined || encoding.toLowerCase() === 'identity';
    if (rule.readsJson && readable) {
      readJson(req, res, (err?: unknown) => {
        if (err) next(err);
        // Keycloak would do what the gateway reads as nothing (or as something else).
        else if (!keepJson(req)) res.status(400).json(JSON_NOT_UTF8);
        else go();
      });
    } else go();
  };
}

/**
 * How many roles one request may take from a composite: each is read before (one or two admin
 * calls); the console takes a page of them at most.
 */
export const MAX_ROLES_TAKEN = 100;

const TOO_MANY_ROLES = {
  status: 400,
  error: 'invalid_request',
  description: `At most ${MAX_ROLES_TAKEN} roles are taken from a composite in one request.`,
} as const;

/** A HEAD of an ending's GET (`endAccessOnSuccess`). */
export const HEAD_OF_ENDING = {
  status: 405,
  error: 'invalid_request',
  description: 'HEAD ends what GET does here, but says nothing of it: use GET or POST.',
} as const;

/** The methods whose ending rules serve `path`, as `Allow` names them. */
function methodsOf(path: string): string {
  const methods = ENDING_RULES.filter((rule) => rule.path === path).flatMap((r) => r.methods);
  return [...new Set(methods)]
    .map((method) => method.toUpperCase())
    .sort()
    .join(', ');
}

/**
 * Keeps the JSON body `readJson` read: its bytes for the proxy, parsed for the ending rule
 * (undefined when it is no JSON: Keycloak refuses it, nothing ends). False when Keycloak would
 * read it in another encoding than UTF-8 (utf8-body.ts).
 */
function keepJson(req: IncomingMessage): boolean {
  const holder = req as IncomingMessage & { body?: unknown };
  if (!Buffer.isBuffer(holder.body)) return true;
  const bytes = holder.body;
  const text = utf8JsonTextOf(req.rawHeaders, bytes);
  if (text === undefined) return false;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  holder.body = { bytes, json };
  return true;
}

/** The JSON body `keepJson` kept, parsed; undefined if none. */
function jsonOf(req: IncomingMessage): unknown {
  const body = (req as IncomingMessage & { body?: unknown }).body;
  return body !== null && typeof body === 'object' && 'json' in body ? body.json : undefined;
}
