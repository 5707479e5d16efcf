import type { Knex } from 'knex';
import { AUDIT_TABLE } from './audit-rows.ts';
import type { KeycloakEventKind } from './keycloak-event-records.ts';

/**
 * What a pull of Keycloak's events is for: the audit log's records, or the auth area's ending of
 * Basic logins on credential changes (done also while the log is off). Each has its own cursors
 * and leases (migrations 20261128-007 and 20261129-012), so neither passes events the other has
 * not taken. The type is read from the list, which the pulls' metric labels use too.
 */
export const KEYCLOAK_EVENT_PURPOSES = ['audit', 'auth'] as const;
export type KeycloakEventPurpose = (typeof KEYCLOAK_EVENT_PURPOSES)[number];

const PULLS_TABLE: Record<KeycloakEventPurpose, string> = {
  audit: 'audit_keycloak_pulls',
  auth: 'auth_keycloak_pulls',
};

/** Where the log stands in one kind of a realm's events: the last time taken, and its ids. */
export interface EventCursor {
  /** Keycloak's epoch ms of the last event taken; undefined before the first. */
  timeMs: number | undefined;
  /** The ids of the events taken at `timeMs` (several events share a millisecond). */
  ids: string[];
}

export type RealmCursors = Record<KeycloakEventKind, EventCursor>;

/**
 * The cursors and leases of one purpose's pulls. A replica pulls a realm for a purpose only
 * while it holds the realm's lease of that purpose, so one replica at a time moves those
 * cursors; a lease ends when its holder gives it back or, if the holder died, when it runs out.
 * Times of leases are the database's, so the replicas' clocks need not agree.
 */
export interface KeycloakEventCursors {
  /** Takes the lease of `realm` for `leaseMs` and reads its cursors; undefined if another holds it. */
  claim(realm: string, holder: string, leaseMs: number): Promise<RealmCursors | undefined>;
  /**
   * Extends `holder`'s lease of `realm` to `leaseMs` from now; false if it lost it (another took
   * it once it ran out, even one that has since given it back: `claim` would take it again, over
   * cursors that other one may have moved).
   */
  renew(realm: string, holder: string, leaseMs: number): Promise<boolean>;
  /** Moves the cursors of `realm` and gives the lease back; false if `holder` lost it. */
  saveAndRelease(realm: string, holder: string, cursors: RealmCursors): Promise<boolean>;
  /**
   * The Keycloak event ids already in the log of `realm` at or after `sinceMs`: an event
   * written by a holder that stopped before it could move the cursor is not taken twice (the
   * audit purpose's question; the log is the same whichever cursors ask).
   */
  keptSince(realm: string, sinceMs: number): Promise<Set<string>>;
}

interface PullRow {
  user_time: string | number | null;
  user_ids: unknown;
  admin_time: string | number | null;
  admin_ids: unknown;
}

const idsOf = (value: unknown): string[] =>
  (typeof value === 'string' ? JSON.parse(value) : value) as string[];
const timeOf = (value: string | number | null) => (value === null ? undefined : Number(value));

export function createKeycloakEventCursors(
  db: Knex,
  purpose: KeycloakEventPurpose,
): KeycloakEventCursors {
  const table = PULLS_TABLE[purpose];
  return {
    async claim(realm, holder, leaseMs) {
      const result = await db.raw<{ rows: PullRow[] }>(
        `insert into ${table} (realm, holder, lease_until)
           values (?, ?, now() + ?::double precision * interval '1 millisecond')
         on conflict (realm) do update
           set holder = excluded.holder, lease_until = excluded.lease_until
           where ${table}.holder is null
              or ${table}.holder = excluded.holder
              or ${table}.lease_until < now()
         returning user_time, user_ids, admin_time, admin_ids`,
        [realm, holder, leaseMs],
      );
      const row = result.rows[0];
      if (!row) return undefined;
      return {
        user: { timeMs: timeOf(row.user_time), ids: idsOf(row.user_ids) },
        admin: { timeMs: timeOf(row.admin_time), ids: idsOf(row.admin_ids) },
      };
    },
    async renew(realm, holder, leaseMs) {
      const updated = await db(table)
        .where({ realm, holder })
        .update({
          lease_until: db.raw(`now() + ?::double precision * interval '1 millisecond'`, [leaseMs]),
        });
      return updated === 1;
    },
    async saveAndRelease(realm, holder, cursors) {
      const updated = await db(table)
        .where({ realm, holder })
        .update({
          user_time: cursors.user.timeMs ?? null,
          user_ids: JSON.stringify(cursors.user.ids),
          admin_time: cursors.admin.timeMs ?? null,
          admin_ids: JSON.stringify(cursors.admin.ids),
          holder: null,
          lease_until: null,
        });
      return updated === 1;
    },
    async keptSince(realm, sinceMs) {
      const rows: { id: string }[] = await db(AUDIT_TABLE)
        .where({ org: realm })
        .where('at', '>=', new Date(sinceMs))
        .whereLike('action', 'keycloak.%')
        .select(db.raw(`details->>'keycloakEventId' as id`));
      return new Set(rows.map((row) => row.id));
    },
  };
}
