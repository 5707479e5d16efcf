import type { Knex } from 'knex';

/** What an alignment is of: the back-channel logout URL and the version of the steps. */
export interface AlignmentTarget {
  url: string;
  stepsVersion: number;
}

/** A realm as Keycloak's brief listing names it: its id and its name. */
export interface ListedRealm {
  id: string;
  realm: string;
}

/**
 * The record of which realm was found aligned, for which target and when (the table
 * `realm_alignments`). Every age is read on the database's clock: replicas' clocks may differ.
 */
export interface RealmAlignmentsRepo {
  /** The ids of the realms recorded for `target` less than `maxAgeSeconds` ago. */
  freshIds(target: AlignmentTarget, maxAgeSeconds: number): Promise<Set<string>>;
  /** Whether `realmId` is recorded for `target` less than `maxAgeSeconds` ago (a twin's work). */
  isFresh(realmId: string, target: AlignmentTarget, maxAgeSeconds: number): Promise<boolean>;
  /** Records the realm as aligned for `target` now. */
  record(realm: ListedRealm, target: AlignmentTarget): Promise<void>;
  /**
   * Forgets the records of realms not in `listed` (deleted from Keycloak) that are older than
   * `minAgeSeconds`: a realm made after the listing, and recorded by its provisioning, is kept.
   */
  forgetUnlisted(listed: ReadonlySet<string>, minAgeSeconds: number): Promise<void>;
}

const TABLE = 'realm_alignments';

/** Creates the repository of realm alignments over the given database. */
export function createRealmAlignmentsRepo(db: Knex): RealmAlignmentsRepo {
  const fresh = (target: AlignmentTarget, maxAgeSeconds: number) =>
    db(TABLE)
      .where({ url: target.url, steps_version: target.stepsVersion })
      .andWhereRaw('aligned_at > now() - make_interval(secs => ?)', [maxAgeSeconds]);
  return {
    async freshIds(target, maxAgeSeconds) {
      return new Set(await fresh(target, maxAgeSeconds).pluck<string[]>('realm_id'));
    },
    async isFresh(realmId, target, maxAgeSeconds) {
      return (
        (await fresh(target, maxAgeSeconds).andWhere({ realm_id: realmId }).first()) !== undefined
      );
    },
    async record(realm, target) {
      const row = {
        realm_id: realm.id,
        realm: realm.realm,
        url: target.url,
        steps_version: target.stepsVersion,
        aligned_at: db.fn.now(),
      };
      await db(TABLE).insert(row).onConflict('realm_id').merge();
    },
    async forgetUnlisted(listed, minAgeSeconds) {
      const old = await db(TABLE)
        .whereRaw('aligned_at < now() - make_interval(secs => ?)', [minAgeSeconds])
        .pluck<string[]>('realm_id');
      const gone = old.filter((id) => !listed.has(id));
      if (gone.length > 0) await db(TABLE).whereIn('realm_id', gone).delete();
    },
  };
}
