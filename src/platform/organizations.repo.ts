import type { Knex } from 'knex';
import { toIsoTimestamp } from '../db/column-values.ts';
import type { Organization } from './organizations.schemas.ts';

export interface NewOrganization {
  /** The Keycloak realm name. */
  id: string;
  name: string;
}

export interface OrganizationsRepo {
  list(): Promise<Organization[]>;
  find(id: string): Promise<Organization | undefined>;
  /** Inserts unless the id exists; either way returns the stored record, unchanged if present. */
  insertIfAbsent(organization: NewOrganization): Promise<Organization>;
  /**
   * Inserts unless the id exists; true when this call made the record. Within a transaction, an
   * insert of the same id by another one not yet committed is waited for (false once it is).
   */
  insertNew(organization: NewOrganization): Promise<boolean>;
  /** The stored record; throws when there is none (read right after it was made). */
  get(id: string): Promise<Organization>;
  /**
   * Within a transaction: takes the row's lock until the transaction ends (a concurrent lock of
   * the same row waits for it); false when there is no row.
   */
  lock(id: string): Promise<boolean>;
  /**
   * Sets `enabled` and `status` unless the row has them already (then its timestamp stays);
   * returns the stored record, undefined when there is none.
   */
  setEnabled(id: string, enabled: boolean, status: string): Promise<Organization | undefined>;
  /** Deletes the row (its workspaces and operations go with it); false when there was none. */
  delete(id: string): Promise<boolean>;
}

interface OrganizationRow {
  id: string;
  name: string;
  enabled: boolean;
  status: string;
  create_timestamp: unknown;
  last_update_timestamp: unknown;
}

const TABLE = 'organizations';

function toOrganization(row: OrganizationRow): Organization {
  return {
    id: row.id,
    name: row.name,
    enabled: row.enabled,
    status: row.status,
    create_timestamp: toIsoTimestamp(row.create_timestamp),
    last_update_timestamp: toIsoTimestamp(row.last_update_timestamp),
  };
}

/** Creates the organizations repository over the given database. */
export function createOrganizationsRepo(db: Knex): OrganizationsRepo {
  async function find(id: string): Promise<Organization | undefined> {
    const row = await db<OrganizationRow>(TABLE).where({ id }).first();
    return row ? toOrganization(row) : undefined;
  }

  async function get(id: string): Promise<Organization> {
    const stored = await find(id);
    if (!stored) throw new Error(`organization ${id} vanished right after insert`);
    return stored;
  }

  return {
    async list() {
      // Byte-order collation keeps the order identical whatever the server's default collation.
      const rows = await db<OrganizationRow>(TABLE).select().orderByRaw('id collate "C"');
      return rows.map(toOrganization);
    },
    find,
    async insertIfAbsent({ id, name }) {
      await db(TABLE).insert({ id, name }).onConflict('id').ignore();
      return get(id);
    },
    async insertNew({ id, name }) {
      const made = await db(TABLE).insert({ id, name }).onConflict('id').ignore().returning('id');
      return made.length > 0;
    },
    get,
    async lock(id) {
      // Not `for update`: a new workspace's foreign key check (`for key share`) must not wait.
      return (await db(TABLE).select('id').where({ id }).forNoKeyUpdate().first()) !== undefined;
    },
    async setEnabled(id, enabled, status) {
      await db(TABLE)
        .where({ id })
        .andWhere((changed) => {
          void changed.whereNot({ enabled }).orWhereNot({ status });
        })
        .update({ enabled, status, last_update_timestamp: db.fn.now() });
      return find(id);
    },
    async delete(id) {
      return (await db(TABLE).where({ id }).del()) > 0;
    },
  };
}
