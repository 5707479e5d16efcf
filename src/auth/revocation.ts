import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ReplicaBus } from '../cache/replica-bus.ts';
import { readReplicaMessage } from '../cache/replica-message.ts';
import { TtlLru } from '../cache/ttl-lru.ts';
import type { AuthMetrics, RevocationSource } from './auth-metrics.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import type { Principal } from '../tenancy/principal.ts';

/** A Keycloak session as one client holds it: the session id (`sid`) and the client (`azp`). */
const clientSession = z.object({ sessionId: z.string(), clientId: z.string() });
export type ClientSession = z.infer<typeof clientSession>;

const seconds = z.number().nonnegative();

/** A revocation as it travels between replicas. */
const revocationMessage = z.object({
  realm: z.string(),
  userId: z.string(),
  sessionIds: z.array(z.string()),
  /** Epoch ms: cached Basic logins of the user from before this moment are dropped. */
  at: z.number(),
  /** How long the session ids must stay refused: the longest an access token can still live. */
  ttlSeconds: seconds,
  /**
   * How long the user's cached Basic logins can be served: the longer of the Basic cache bound
   * and the outage bound (basic/cached-login.ts `longestServedSeconds`).
   */
  userTtlSeconds: seconds,
  /**
   * When set, every access token of the user issued before `at` is refused this long (the
   * longest an access token can live): a disabled or deleted user, a removed workspace role.
   * Absent, only the sessions listed and the cached Basic logins are concerned.
   */
  tokenTtlSeconds: seconds.optional(),
  /**
   * When set, the revocation concerns every user of the realm (`userId` is ignored): every
   * access token issued before `at` is refused for `tokenTtlSeconds`, every cached Basic login
   * from before `at` is dropped (Keycloak's "sign out all active sessions").
   */
  wholeRealm: z.literal(true).optional(),
  /**
   * Ids (`jti`) of single access tokens refused for `ttlSeconds`, and nothing else of their
   * session: RFC 7009 revocation of one access token.
   */
  tokenIds: z.array(z.string()).optional(),
  /**
   * One client's part of Keycloak sessions, refused for `ttlSeconds`: the access tokens of that
   * session issued to that client (`azp`) before `at`, and nothing else of the session (RFC 7009
   * revocation of a refresh or offline token: Keycloak ends that client's session only).
   */
  clientSessions: z.array(clientSession).optional(),
  /**
   * Roles deleted in the realm (`client`: the client id, absent for a realm role): every token of
   * the realm issued before `at` that carries one is refused for `tokenTtlSeconds`, and a cached
   * Basic login that does logs in again (`userTtlSeconds`). Its holders cannot be read once it
   * is gone (groups, composite roles, default roles all give it), but its tokens name it.
   */
  endedRoles: z.array(z.object({ client: z.string().optional(), name: z.string() })).optional(),
  /**
   * Several users of the realm, each as `userId` alone would be (which is then ignored): a
   * group's members, who lose its roles at once, in one message rather than one each.
   */
  userIds: z.array(z.string()).optional(),
  /**
   * When set, the message refuses nothing: the realm's tokens issued before `at` may live this
   * long (its lifetime before an administrator shortened it), and every refusal of them lasts as
   * long while one may be alive (as a lifetime served, `noteServedLifetime`). `ttlSeconds` says
   * the same, so the message is stored as long.
   */
  formerLifetimeSeconds: seconds.optional(),
  /** The replica that made it (absent from older replicas): it ignores its own message. */
  from: z.string().optional(),
});
type RevocationMessage = z.infer<typeof revocationMessage>;

export interface RevocationList {
  /**
   * True when tokens of this Keycloak session of the realm must be refused. A session is
   * revoked in the realm that named it only: a logout token or ID token hint a realm's key
   * signed ends no session of another realm. O(1), in memory.
   */
  isSessionRevoked(realm: string, sessionId: string): boolean;
  /**
   * When the user's sessions were last revoked (epoch ms), while a Basic login cached before
   * could still be served (`userTtlSeconds`, outage bound included).
   */
  userRevokedAt(realm: string, userId: string): number | undefined;
  /**
   * True when this one access token (its `jti`) of the realm must be refused. Per realm, as
   * sessions: a `jti` is chosen by whoever signs, and a realm's revocation ends no token of
   * another realm. O(1), in memory.
   */
  isTokenRevoked(realm: string, tokenId: string): boolean;
  /**
   * True when the tokens of this session issued to this client at `issuedAt` (epoch seconds)
   * must be refused; whole seconds, as `isIssuedBeforeRevocation`. O(1), in memory.
   */
  isClientSessionRevoked(
    realm: string,
    sessionId: string,
    clientId: string,
    issuedAt: number,
  ): boolean;
  /**
   * True when the user's tokens issued at `issuedAt` (epoch seconds, the `iat` claim) must be
   * refused. `iat` has whole seconds, so a token issued in the second of the revocation is
   * refused too: a client that refreshed within that second refreshes again a second later.
   * O(1), in memory, without allocation.
   */
  isIssuedBeforeRevocation(realm: string, userId: string, issuedAt: number): boolean;
  /**
   * True when the token (or cached login) was issued before a role it carries was deleted
   * (`endedRoles`). One size check while no role of any realm was deleted in a token's lifetime.
   */
  carriesEndedRole(principal: RoleHolder): boolean;
  /**
   * Notes that a verified access token of the realm is served `seconds` after its issue (its
   * `exp` and the clock leeway, less its `iat`), until `untilMs` (epoch ms). Every refusal of the
   * realm's tokens then lasts at least the longest such lifetime among the tokens still served:
   * a token issued under a longer lifetime than the realm's settings give now (an administrator
   * shortened it since) stays refused until its own expiry. O(1), in memory.
   */
  noteServedLifetime(realm: string, seconds: number, untilMs: number): void;
  /**
   * Tells every replica, and those started later while it matters, that the realm's tokens issued
   * until now may live `seconds` (the clock leeway included): read before an administrator
   * changes the realm's lifetimes, so that a refusal made after a shortening still lasts as long
   * as a token issued before it, served yet or not.
   */
  rememberFormerLifetime(realm: string, seconds: number): Promise<void>;
  /**
   * Refuses the sessions here at once and tells every other replica. `at` (epoch ms, never
   * later than now) is the moment before which tokens are refused: now unless given (a realm's
   * not-before set in Keycloak names its own).
   */
  revoke(revocation: Omit<RevocationMessage, 'at'> & { at?: number }): Promise<void>;
}

/**
 * What a refusal of a realm's tokens concerns: all of them (issued before `at`, now unless
 * given), or those that carry one of the roles ended.
 */
export type RealmWideScope =
  { wholeRealm: true; at?: number } | { endedRoles: NonNullable<RevocationMessage['endedRoles']> };

/**
 * Refuses, on every replica, the realm's access tokens that `scope` names for `tokenTtlSeconds`
 * (the longest one can live, the clock leeway included), and drops the cached Basic logins it
 * names (served up to `basicSeconds`): the one writing of a realm-wide refusal, for what the
 * admin listener passes on (auth-proxy/end-access.ts) and what the realmgate API deletes
 * (platform/token-refusal.ts).
 */
export function revokeRealmWide(
  revocations: Pick<RevocationList, 'revoke'>,
  realm: string,
  scope: RealmWideScope,
  bounds: { tokenTtlSeconds: number; basicSeconds: number },
): Promise<void> {
  return revokeBeyondSessions(revocations, realm, scope, bounds);
}

/**
 * Whose access a per-user refusal ends: one user, or several of a realm (a group's members), each
 * as the user alone would be, in one message; from `at` (epoch ms, now unless given: a credential
 * change Keycloak announced names its own).
 */
export type UsersScope = ({ userId: string } | { userIds: string[] }) & { at?: number };

/**
 * Drops, on every replica, the cached Basic logins of the users `scope` names (served up to
 * `basicSeconds`) and, with `tokenTtlSeconds` (the longest one can live, the clock leeway
 * included), refuses that long each access token of theirs issued before: the one writing of a
 * per-user refusal, for the users whose access ends at the admin listener or by Keycloak's word
 * (auth-proxy/access-revocations.ts, basic/credential-changes.ts) and those the realmgate API
 * changes (platform/token-refusal.ts, platform/users.service.ts).
 */
export function revokeUsers(
  revocations: Pick<RevocationList, 'revoke'>,
  realm: string,
  scope: UsersScope,
  bounds: { basicSeconds: number; tokenTtlSeconds?: number },
): Promise<void> {
  return revokeBeyondSessions(revocations, realm, scope, bounds);
}

/**
 * What a realm-wide and a per-user refusal share: they name no session (their scope says whose
 * tokens and cached Basic logins go, whatever the session), and the cached Basic logins they
 * concern stay dropped for at least a second.
 */
function revokeBeyondSessions(
  revocations: Pick<RevocationList, 'revoke'>,
  realm: string,
  scope: RealmWideScope | UsersScope,
  bounds: { basicSeconds: number; tokenTtlSeconds?: number },
): Promise<void> {
  return revocations.revoke({
    realm,
    // No one's unless the scope names a user: a realm-wide scope or a list names the tokens.
    userId: '',
    sessionIds: [],
    ttlSeconds: 1,
    userTtlSeconds: Math.max(bounds.basicSeconds, 1),
    ...(bounds.tokenTtlSeconds !== undefined && { tokenTtlSeconds: bounds.tokenTtlSeconds }),
    ...scope,
  });
}

/** What `carriesEndedRole` reads of a principal. */
export type RoleHolder = Pick<Principal, 'realm' | 'realmRoles' | 'clientRoles' | 'issuedAt'>;

/** A deleted role: tokens issued before `at` that carry it are refused until `until`. */
interface EndedRole {
  client: string | undefined;
  name: string;
  at: number;
  until: number;
}

const MAX_REVOKED = 1_000_000;
/** How soon a revocation Redis did not take, though up, is offered again. */
const SHARE_RETRY_MS = 1000;

/**
 * Revoked sessions, checked on every request without any network call: each replica keeps them
 * in memory. With the replica bus (Redis, or the supervising process between the workers of one
 * gateway) they are shared: a revocation is stored as keys that
 * expire with the last token it concerns (read at start, so a replica that was down learns what
 * it missed) and published, so other replicas apply it within milliseconds.
 */
export async function createRevocationList(options: {
  bus?: ReplicaBus;
  keyPrefix: string;
  metrics: Pick<AuthMetrics, 'revocationApplied'>;
  logger: Logger;
  clock?: Clock;
}): Promise<RevocationList> {
  const { clock = systemClock } = options;
  // By realm, then session id: the per-request look-up builds no key string.
  const sessions = new Map<string, TtlLru<Refusal>>();
  const users = new TtlLru<Refusal>(MAX_REVOKED, clock);
  const userKey = (realm: string, userId: string) => `${realm}\u0000${userId}`;
  // By realm, then user id: the per-request look-up builds no key string.
  const userTokens = new Map<string, TtlLru<Refusal>>();
  // By realm: when its every token and cached login from before that moment is refused.
  const realms = new TtlLru<Refusal>(MAX_REVOKED, clock);
  // By realm, then `jti` (a realm's revocation refuses no token of another realm).
  const tokens = new Map<string, TtlLru<Refusal>>();
  // By realm, then session and client: when that client's part of the session ended.
  const clientSessions = new Map<string, TtlLru<Refusal>>();
  const clientSessionKey = (sessionId: string, clientId: string) => `${sessionId}\u0000${clientId}`;
  const latestOf = (a: number | undefined, b: number | undefined) =>
    a === undefined ? b : b === undefined ? a : Math.max(a, b);
  // By realm: the roles deleted there while a token issued before could be served.
  const endedRoles = new Map<string, EndedRole[]>();
  // By realm: the longest a token still served was served for after its issue (noteServedLifetime).
  const servedLifetimes = new Map<string, { seconds: number; until: number }>();

  /** The longest lifetime of a token of the realm still served, in seconds; 0 when none. */
  function longestServedSeconds(realm: string): number {
    const known = servedLifetimes.get(realm);
    return known && known.until > clock.now() ? known.seconds : 0;
  }

  /**
   * The revocation with each refusal of tokens it makes lasting at least the longest lifetime of
   * a token of its realm still served (a refusal of one token by its `jti` lasts that token's own
   * life already): how long a revoked session's or user's tokens can live is read from the tokens
   * seen, not only from the realm's settings of today.
   */
  function outlivingServedTokens(message: RevocationMessage): RevocationMessage {
    const served = longestServedSeconds(message.realm);
    const sessions = message.sessionIds.length > 0 || (message.clientSessions?.length ?? 0) > 0;
    return {
      ...message,
      ttlSeconds: sessions ? Math.max(message.ttlSeconds, served) : message.ttlSeconds,
      ...(message.tokenTtlSeconds !== undefined && {
        tokenTtlSeconds: Math.max(message.tokenTtlSeconds, served),
      }),
    };
  }

  /** Whether `principal` carries one of `ended` issued before it ended; drops those over. */
  function carriesOneOf(principal: RoleHolder, ended: EndedRole[], realm: string): boolean {
    const now = clock.now();
    const issued = principal.issuedAt * 1000;
    let carries = false;
    let live = 0;
    for (const role of ended) {
      if (role.until <= now) continue;
      ended[live++] = role;
      const held =
        role.client === undefined ? principal.realmRoles : principal.clientRoles[role.client];
      if (issued < role.at && held?.includes(role.name)) carries = true;
    }
    ended.length = live;
    if (live === 0) endedRoles.delete(realm);
    return carries;
  }

  /** The realm's part of a map by realm, made on first use. */
  function byRealm(map: Map<string, TtlLru<Refusal>>, realm: string): TtlLru<Refusal> {
    let part = map.get(realm);
    if (!part) map.set(realm, (part = new TtlLru(MAX_REVOKED, clock)));
    return part;
  }

  function apply(revocation: RevocationMessage, source: RevocationSource): void {
    const former = revocation.formerLifetimeSeconds;
    if (former !== undefined) {
      local.noteServedLifetime(revocation.realm, former, revocation.at + former * 1000);
      return;
    }
    options.metrics.revocationApplied(source);
    // A peer may have served longer-lived tokens of the realm than the replica that revoked.
    const message = outlivingServedTokens(revocation);
    const { at } = message;
    const until = (seconds: number) => at + seconds * 1000;
    for (const id of message.tokenIds ?? [])
      refuse(byRealm(tokens, message.realm), id, at, until(message.ttlSeconds), clock);
    for (const { sessionId, clientId } of message.clientSessions ?? []) {
      refuse(
        byRealm(clientSessions, message.realm),
        clientSessionKey(sessionId, clientId),
        at,
        until(message.ttlSeconds),
        clock,
      );
    }
    if (message.endedRoles) {
      const until = at + lifetimeSecondsOf(message) * 1000;
      if (until <= clock.now()) return;
      const ended = endedRoles.get(message.realm) ?? [];
      for (const { client, name } of message.endedRoles) ended.push({ client, name, at, until });
      endedRoles.set(message.realm, ended);
      return;
    }
    if (message.wholeRealm) {
      refuse(realms, message.realm, at, until(lifetimeSecondsOf(message)), clock);
      return;
    }
    if (message.sessionIds.length > 0) {
      const realmSessions = byRealm(sessions, message.realm);
      for (const id of message.sessionIds)
        refuse(realmSessions, id, at, until(message.ttlSeconds), clock);
    }
    const userIds = message.userIds ?? [message.userId];
    // None: the revocation leaves the user's cached Basic logins alone (a session's end).
    if (message.userTtlSeconds > 0) {
      const userUntil = until(message.userTtlSeconds);
      for (const id of userIds) refuse(users, userKey(message.realm, id), at, userUntil, clock);
    }
    if (message.tokenTtlSeconds !== undefined) {
      const realmUsers = byRealm(userTokens, message.realm);
      const tokenUntil = until(message.tokenTtlSeconds);
      for (const id of userIds) refuse(realmUsers, id, at, tokenUntil, clock);
    }
  }

  const local = {
    isSessionRevoked: (realm: string, sessionId: string) =>
      sessions.get(realm)?.get(sessionId) !== undefined,
    userRevokedAt: (realm: string, userId: string) =>
      latestOf(users.get(userKey(realm, userId))?.at, realms.get(realm)?.at),
    isTokenRevoked: (realm: string, tokenId: string) =>
      tokens.size > 0 && tokens.get(realm)?.get(tokenId) !== undefined,
    isClientSessionRevoked(realm: string, sessionId: string, clientId: string, issuedAt: number) {
      if (clientSessions.size === 0) return false;
      const endedAt = clientSessions.get(realm)?.get(clientSessionKey(sessionId, clientId))?.at;
      return endedAt !== undefined && issuedAt * 1000 < endedAt;
    },
    isIssuedBeforeRevocation(realm: string, userId: string, issuedAt: number) {
      if (userTokens.size === 0 && realms.size === 0) return false;
      const revokedAt = latestOf(userTokens.get(realm)?.get(userId)?.at, realms.get(realm)?.at);
      return revokedAt !== undefined && issuedAt * 1000 < revokedAt;
    },
    carriesEndedRole(principal: RoleHolder) {
      if (endedRoles.size === 0) return false;
      const ended = endedRoles.get(principal.realm);
      return ended !== undefined && carriesOneOf(principal, ended, principal.realm);
    },
    noteServedLifetime(realm: string, seconds: number, untilMs: number) {
      const known = servedLifetimes.get(realm);
      const live = known !== undefined && known.until > clock.now();
      if (live && known.seconds > seconds) return;
      const until = live && known.seconds === seconds ? Math.max(known.until, untilMs) : untilMs;
      servedLifetimes.set(realm, { seconds, until });
    },
  };
  if (!options.bus) {
    const revoke: RevocationList['revoke'] = (revocation) =>
      Promise.resolve(apply({ ...revocation, at: momentOf(revocation.at, clock) }, 'local'));
    return {
      ...local,
      revoke,
      rememberFormerLifetime: (realm, s) => revoke(formerLifetime(realm, s)),
    };
  }
  const bus: ReplicaBus = options.bus;

  const channel = `${options.keyPrefix}revocations`;
  const keyOf = (id: string) => `${options.keyPrefix}revoked:${id}`;
  // Subscribe before reading the stored revocations, so none falls between the two.
  await bus.subscribe(channel, (payload) => {
    const message = readReplicaMessage(payload, revocationMessage);
    if (!message) {
      options.logger.error('revocation channel: unreadable message');
      return;
    }
    // This replica's own revocation comes back on the channel; it applied it already.
    if (message.from !== bus.replicaId) apply(message, 'peer');
  });
  const readStored = () =>
    loadStored().catch((err: unknown) =>
      options.logger.warn({ err }, 'revocation channel: could not read stored revocations'),
    );
  if (bus.isReady()) await readStored();
  // After an outage: this replica shares what it revoked meanwhile, and reads what the others
  // stored while its subscription was down. The two connections come back in either order, and
  // the read goes over the commands one: it is made when each is back, so that a read tried
  // before the commands connection was (and failed) is made again.
  const unshared = new Set<RevocationMessage>();
  let retry: NodeJS.Timeout | undefined;
  bus.onCommandsBack(() => {
    void shareUnshared();
    void readStored();
  });
  bus.onSubscriptionBack(() => void readStored());

  async function share(message: RevocationMessage): Promise<void> {
    const payload = JSON.stringify(message);
    const ttl = Math.max(lifetimeSecondsOf(message), 1);
    // Both sent at once, the store first: on one Redis connection the SET lands before the
    // PUBLISH, so a replica whose subscription came back too late for the message finds it
    // when it reads the store next (onSubscriptionBack); a worker's siblings hear it through the
    // supervising process at once (cache/worker-bus.ts), Redis or not. A failure of either
    // leaves it to be shared again, both steps.
    await Promise.all([
      bus.keep(keyOf(storedIdOf(message)), payload, ttl),
      bus.publish(channel, payload),
    ]);
  }

  async function shareUnshared(): Promise<void> {
    for (const message of unshared) {
      // Past its longest lifetime a revocation has nothing left to refuse.
      const ttlMs = lifetimeSecondsOf(message) * 1000;
      if (message.at + ttlMs < clock.now()) {
        unshared.delete(message);
        continue;
      }
      try {
        await share(message);
        unshared.delete(message);
      } catch {
        retryLater();
        return;
      }
    }
  }

  /**
   * Another try in a second while Redis takes commands: a share can fail with Redis up (a
   * time-out on a busy machine just after it came back), and no reconnection would come to try
   * again. While Redis is down the next reconnection does it (onCommandsBack).
   */
  function retryLater(): void {
    if (retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      if (bus.isReady()) void shareUnshared();
    }, SHARE_RETRY_MS);
    retry.unref();
  }

  async function loadStored(): Promise<void> {
    for (const payload of await bus.kept(keyOf(''))) {
      const message = readReplicaMessage(payload, revocationMessage);
      if (message) apply(message, 'peer');
      else options.logger.error('revocation channel: unreadable stored revocation');
    }
  }

  const revoke: RevocationList['revoke'] = async (revocation) => {
    const at = momentOf(revocation.at, clock);
    // Shared (and stored) as long as this replica's served tokens need.
    const message = outlivingServedTokens({ ...revocation, at, from: bus.replicaId });
    apply(message, 'local');
    try {
      await share(message);
    } catch (err) {
      options.logger.error(
        { err },
        'revocation applies to this replica only until Redis is back: Redis failed',
      );
      unshared.add(message);
      // Redis may have come back while this attempt timed out.
      if (bus.isReady()) await shareUnshared();
    }
  };
  return {
    ...local,
    revoke,
    rememberFormerLifetime: (realm, seconds) => revoke(formerLifetime(realm, seconds)),
  };
}

/**
 * What is refused under one key (a session, a user, a realm, a token): what was issued before
 * `at` (epoch ms), until `until`.
 */
interface Refusal {
  at: number;
  until: number;
}

/**
 * Adds a refusal to what `refusals` holds under `key`: the later moment and the later end of
 * the two are kept, so no revocation, whatever order the replicas hear them in (a restart's
 * read of the stored ones, one shared late after an outage), shortens or moves back another.
 */
function refuse(
  refusals: TtlLru<Refusal>,
  key: string,
  at: number,
  until: number,
  clock: Clock,
): void {
  // Over already (a not-before older than every token still served): nothing to keep.
  if (until <= clock.now()) return;
  const known = refusals.get(key);
  const kept = known
    ? { at: Math.max(known.at, at), until: Math.max(known.until, until) }
    : { at, until };
  refusals.set(key, kept, kept.until);
}

/** The message that makes every replica remember a realm's former lifetime: it refuses nothing. */
function formerLifetime(realm: string, seconds: number): Omit<RevocationMessage, 'at'> {
  return {
    realm,
    userId: '',
    sessionIds: [],
    ttlSeconds: seconds,
    userTtlSeconds: 0,
    formerLifetimeSeconds: seconds,
  };
}

/** The moment a revocation starts from: the one given, if not in the future, else now. */
function momentOf(at: number | undefined, clock: Clock): number {
  const now = clock.now();
  return at === undefined ? now : Math.min(at, now);
}

/**
 * The key a revocation is stored under: one per realm, user and moment, per deleted role and per
 * list of users (two roles deleted, a role and the realm's sessions, or two parts of a group's
 * members, in one millisecond are kept apart).
 */
function storedIdOf(message: RevocationMessage): string {
  const id = `${message.realm}:${message.userId}:${message.at}`;
  if (message.formerLifetimeSeconds !== undefined) return `${id}:lifetime`;
  if (message.userIds) {
    const digest = createHash('sha256').update(message.userIds.join('\n')).digest('base64url');
    return `${id}:users:${digest}`;
  }
  const roles = message.endedRoles?.map(({ client, name }) => `${client ?? ''}/${name}`);
  return roles ? `${id}:${roles.join(',')}` : id;
}

/** How long a revocation has something to refuse: its longest-lived part. */
function lifetimeSecondsOf(message: RevocationMessage): number {
  return Math.max(message.ttlSeconds, message.userTtlSeconds, message.tokenTtlSeconds ?? 0);
}
