import type { Clock } from '../../time/clock.ts';
import { revokeUsers, type RevocationList } from '../revocation.ts';

/**
 * Changes made to users in Keycloak itself (its console, its admin API, its account console),
 * as its events of a realm tell them: each ends the user's cached Basic logins at once, on every
 * replica and worker, instead of up to BASIC_CACHE_MAX_SECONDS later. Only the fields read here
 * are named, so any list of Keycloak's events fits.
 */
export interface KeycloakEventsOfRealm {
  user: readonly { time: number; type: string; userId?: string; error?: string }[];
  admin: readonly {
    time: number;
    operationType: string;
    resourcePath?: string;
    error?: string;
  }[];
}

/** Called with a realm's events as they are pulled (audit/keycloak-event-pull.ts). */
export type KeycloakEventsSeen = (realm: string, events: KeycloakEventsOfRealm) => Promise<void>;

/**
 * The user events that change what a password login of the user may do: a password or another
 * credential (an OTP) set or removed by the user (account console, required action, reset by
 * e-mail), the account deleted, or disabled by brute-force detection. A temporary lockout is
 * not one: anyone can cause it with wrong passwords, and the gateway throttles those itself.
 */
const CREDENTIAL_USER_EVENTS = new Set([
  'UPDATE_PASSWORD',
  'UPDATE_CREDENTIAL',
  'REMOVE_CREDENTIAL',
  'UPDATE_TOTP',
  'REMOVE_TOTP',
  'RESET_PASSWORD',
  'DELETE_ACCOUNT',
  'USER_DISABLED_BY_PERMANENT_LOCKOUT',
]);

/**
 * `users/<id>` and what lies under it. Keycloak's admin events name no credential type (the
 * gateway saves them without their representation), so every administrator change of a user
 * counts: a password reset (`ACTION users/<id>/reset-password`), a credential removed, a
 * required action such as CONFIGURE_TOTP or the user disabled (`UPDATE users/<id>`), the user
 * deleted, roles or groups changed, sessions ended. Each costs that user one password grant.
 */
const USER_PATH = /^users\/([^/]+)(\/.*)?$/;

/** Each user whose cached Basic logins `events` end, with the latest such change (epoch ms). */
export function credentialChangesOf(events: KeycloakEventsOfRealm): Map<string, number> {
  const changes = new Map<string, number>();
  const note = (userId: string, time: number) =>
    changes.set(userId, Math.max(time, changes.get(userId) ?? time));
  for (const event of events.user) {
    if (!event.error && event.userId && CREDENTIAL_USER_EVENTS.has(event.type)) {
      note(event.userId, event.time);
    }
  }
  for (const event of events.admin) {
    const match = event.error ? null : USER_PATH.exec(event.resourcePath ?? '');
    // A user just made has no login to end.
    if (match && (match[2] !== undefined || event.operationType !== 'CREATE')) {
      note(match[1]!, event.time);
    }
  }
  return changes;
}

/**
 * Of those, the user events after which a login refused before may be let in: a new password
 * (it may be one refused), a credential removed (an OTP the login lacked).
 */
const REFUSAL_ENDING_USER_EVENTS = new Set([
  'UPDATE_PASSWORD',
  'RESET_PASSWORD',
  'UPDATE_CREDENTIAL',
  'REMOVE_CREDENTIAL',
  'REMOVE_TOTP',
]);

/**
 * The same for an administrator's changes, below `users/<id>`: the user updated (enabled again,
 * a required action taken off, a password in its representation), a password reset, a
 * credential changed or removed, credential types disabled (the console's "Reset OTP"). Not
 * roles, groups, sessions or a deletion: each user found costs a user-name lookup (one admin
 * call), so a bulk role change costs none.
 */
const REFUSAL_ENDING_USER_PATHS =
  /^(|\/reset-password|\/credentials(\/.*)?|\/disable-credential-types)$/;

/**
 * A user's brute-force lockout cleared (the console's "Unlock" on the user): the right password
 * refused while it lasted is remembered as a wrong one.
 */
const UNLOCKED_USER_PATH = /^attack-detection\/brute-force\/users\/([^/]+)$/;

/** The users whose refused logins `events` may have turned into good ones. */
export function refusalEndingsOf(events: KeycloakEventsOfRealm): Set<string> {
  const users = new Set<string>();
  for (const event of events.user) {
    if (!event.error && event.userId && REFUSAL_ENDING_USER_EVENTS.has(event.type)) {
      users.add(event.userId);
    }
  }
  for (const event of events.admin) {
    const match = event.error ? null : USER_PATH.exec(event.resourcePath ?? '');
    // `users/<id>` itself: only an update (its creation and deletion let nobody in).
    const below = match?.[2] ?? (event.operationType === 'UPDATE' ? '' : undefined);
    if (match && below !== undefined && REFUSAL_ENDING_USER_PATHS.test(below)) {
      users.add(match[1]!);
    }
    const unlocked = event.error ? null : UNLOCKED_USER_PATH.exec(event.resourcePath ?? '');
    if (unlocked && event.operationType === 'DELETE') users.add(unlocked[1]!);
  }
  return users;
}

/**
 * How far Keycloak's clock may be behind the gateway's before a change still of use is taken for
 * an old one: a minute, well past what synchronised clocks differ by.
 */
const CLOCK_MARGIN_MS = 60_000;

/** The events of `events` at or after `sinceMs` (Keycloak's epoch ms). */
function eventsSince(events: KeycloakEventsOfRealm, sinceMs: number): KeycloakEventsOfRealm {
  return {
    user: events.user.filter((e) => e.time >= sinceMs),
    admin: events.admin.filter((e) => e.time >= sinceMs),
  };
}

/**
 * Ends the cached Basic logins granted before each change `events` tell (credentialChangesOf):
 * through the revocation list, which tells every replica and worker. The change's own time is
 * the moment, on Keycloak's clock as the logins' `iat`: a login made since with the new password
 * stays. Bearer tokens are left alone, as Keycloak leaves the user's sessions. After a change
 * that may let a refused login in (refusalEndingsOf), the user's remembered wrong passwords are
 * dropped too (`passwordSet`), as for a password set through the gateway: the new password may
 * be one of them (an administrator giving an account the password its jobs use).
 *
 * A change told late (the events' first pull, which starts at the oldest Keycloak keeps, or one
 * after a long stop) is passed over once it can no longer matter: older than the longest a
 * login is served, it ends no login still cached; older than the failed-login window, it came
 * before every failure remembered, and dropping them would only forgive wrong passwords.
 */
export function endBasicLoginsOnCredentialChanges(deps: {
  revocations: Pick<RevocationList, 'revoke'>;
  /** The longest a cached Basic login is served (outage included): the refusal lasts as long. */
  basicLoginSeconds: number;
  /** How long the failed-login memory keeps a failure (LOGIN_FAILURE_WINDOW_SECONDS). */
  failureWindowSeconds: number;
  /** Drops the failures the failed-login memory keeps for the user (auth.area.ts). */
  passwordSet: (realm: string, userId: string) => Promise<void>;
  clock: Clock;
}): KeycloakEventsSeen {
  return async (realm, events) => {
    const oldest = (seconds: number) => deps.clock.now() - seconds * 1000 - CLOCK_MARGIN_MS;
    const changes = credentialChangesOf(eventsSince(events, oldest(deps.basicLoginSeconds)));
    for (const [userId, at] of changes) {
      await revokeUsers(
        deps.revocations,
        realm,
        { userId, at },
        { basicSeconds: deps.basicLoginSeconds },
      );
    }
    const refusalEndings = refusalEndingsOf(eventsSince(events, oldest(deps.failureWindowSeconds)));
    for (const userId of refusalEndings) await deps.passwordSet(realm, userId);
  };
}
