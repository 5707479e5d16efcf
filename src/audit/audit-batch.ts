import type { Knex } from 'knex';
import {
  canonicalHeadOf,
  chainedFieldsOf,
  GENESIS_HASH,
  sha256Hex,
  type AuditRecord,
} from './audit-chain.ts';
import { AUDIT_TABLE, HEADS_TABLE } from './audit-rows.ts';

/**
 * What the recording code hands the writer: a record's fields, chosen where it happened, without
 * its place in the log (seq, hashes) and with its time as epoch ms; `tokenId` (a token's `jti`)
 * is kept only as its SHA-256, computed by the writer, off the request path.
 */
export type AuditEvent = Omit<AuditRecord, 'seq' | 'at' | 'prevHash' | 'hash' | 'jtiSha256'> & {
  atMs: number;
  tokenId?: string | undefined;
};

/**
 * Where an attempt put the last record of each log it appended to: after an error that may have
 * followed the commit, those records at those places tell whether the attempt committed (all of
 * them: one log's could be another writer's very same records, pulled Keycloak events two
 * replicas' spools hold). The retry must be of the same records (`records`, from the spool's
 * head), as it is all or nothing.
 */
export interface BatchMark {
  lasts: Array<{ org: string; seq: number; hash: string }>;
  records: number;
  /** How many of them it appended (the others were in their log already). */
  appended: number;
}

export interface BatchAppender {
  /**
   * Appends `batch` to the logs it belongs to, in one transaction. Per log (in name order, so
   * two writers never wait on each other crosswise) it locks the log's head row, numbers the
   * records after it, chains their hashes and moves the head. `unclear`: the mark of an earlier
   * attempt of this batch that may have committed; when its records are there, nothing is done.
   * `attempting` is told this attempt's mark before it commits. Answers how many records were
   * appended: a Keycloak event the log already holds is passed over (`unwrittenOf`).
   */
  append(
    batch: readonly AuditEvent[],
    unclear: BatchMark | undefined,
    attempting: (mark: BatchMark) => void,
  ): Promise<number>;
}

/** The batches of one writer (audit-writer.ts). */
export function createBatchAppender(db: Knex): BatchAppender {
  const rows = createRowMaker();
  return {
    async append(batch, unclear, attempting) {
      const byLog = new Map<string, AuditEvent[]>();
      for (const event of batch) {
        const log = byLog.get(event.org);
        if (log) log.push(event);
        else byLog.set(event.org, [event]);
      }
      return db.transaction(async (trx) => {
        if (unclear !== undefined && (await isThere(trx, unclear))) return unclear.appended;
        const mark: BatchMark = { lasts: [], records: batch.length, appended: 0 };
        for (const org of [...byLog.keys()].sort()) {
          const appended = await appendToLog(trx, org, byLog.get(org)!, rows);
          if (appended === undefined) continue;
          mark.lasts.push({ org, seq: appended.seq, hash: appended.hash });
          mark.appended += appended.count;
        }
        if (mark.lasts.length > 0) attempting(mark);
        return mark.appended;
      });
    },
  };
}

async function isThere(trx: Knex.Transaction, mark: BatchMark): Promise<boolean> {
  for (const last of mark.lasts) {
    const hashes = await trx(AUDIT_TABLE)
      .where({ org: last.org, seq: last.seq })
      .pluck<string[]>('hash');
    if (hashes[0] !== last.hash) return false;
  }
  return mark.lasts.length > 0;
}

/**
 * The most text (UTF-16 units, a row's ASCII bytes) one statement carries: a batch is sent as
 * several such statements in its transaction. A parameter past V8's large-object size
 * (128 KiB) is a fresh allocation at each step (the joined text, its UTF-8 bytes, pg's message
 * buffer grown by doubling), and fresh memory is page faults: on a virtual machine they cost the
 * gateway more than the statements' round trips (bench/results.md, 2026-12-01).
 */
const STATEMENT_TEXT = 96 * 1024;

/**
 * Appends one log's records but the Keycloak events it holds already; how many, and the number
 * and hash of the last (undefined: none was new). PostgreSQL numbers and chains them
 * (`audit_append`, migration 20261202-015) under the log's head row lock: the gateway sends each
 * record's fields, one a line, and spends nothing on the hashes.
 */
async function appendToLog(
  trx: Knex.Transaction,
  org: string,
  all: AuditEvent[],
  rowMaker: RowMaker,
): Promise<{ count: number; seq: number; hash: string } | undefined> {
  const events = await unwrittenOf(trx, org, all);
  if (events.length === 0) return undefined;
  // Hashed as stored, as the other fields are (`storable`), though a log is a known realm's name.
  const head = canonicalHeadOf(storable({ org }).org);
  let last: { last_seq: string | number; last_hash: string } | undefined;
  const send = async (rows: string[]) => {
    const answer = await trx.raw<{ rows: (typeof last)[] }>(
      'select last_seq, last_hash from audit_append(?, ?, ?)',
      [org, head, rows.join('\n')],
    );
    last = answer.rows[0];
  };
  let rows: string[] = [];
  let length = 0;
  for (const event of events) {
    const row = rowMaker.rowOf(event);
    rows.push(row);
    length += row.length + 1;
    if (length >= STATEMENT_TEXT) {
      await send(rows);
      rows = [];
      length = 0;
    }
  }
  if (rows.length > 0) await send(rows);
  return { count: events.length, seq: Number(last!.last_seq), hash: last!.last_hash };
}

/** The id of a Keycloak event's record (keycloak-event-records.ts); undefined for any other. */
function keycloakEventIdOf(event: AuditEvent): string | undefined {
  const id = event.details.source === 'keycloak' ? event.details.keycloakEventId : undefined;
  return typeof id === 'string' ? id : undefined;
}

/**
 * `events` less the records of Keycloak events the log already holds: each event is written
 * once. The pull passes over those it finds written (keycloak-event-pull.ts), but not those
 * waiting in another replica's spool: one cut off from the database for longer than its lease
 * leaves them there, unwritten, while another replica takes the lease and pulls them again,
 * and both spools then hold them. Under the log's head row lock (the next append of the log, by
 * any replica, waits for this transaction; a log's head is made first if it has none yet) their
 * ids are looked for; only a batch holding pulled events pays for it.
 */
async function unwrittenOf(
  trx: Knex.Transaction,
  org: string,
  events: AuditEvent[],
): Promise<AuditEvent[]> {
  const ids: string[] = [];
  let since = Infinity;
  let until = -Infinity;
  for (const event of events) {
    const id = keycloakEventIdOf(event);
    if (id === undefined) continue;
    // As stored (`storable`): a NUL would fail the statement, a lone surrogate not match.
    ids.push(cleaned(id));
    since = Math.min(since, event.atMs);
    until = Math.max(until, event.atMs);
  }
  if (ids.length === 0) return events;
  // The head as the writers and a new organization's log make it: locked even when it is new.
  await trx(HEADS_TABLE).insert({ org, seq: 0, hash: GENESIS_HASH }).onConflict('org').ignore();
  await trx(HEADS_TABLE).where({ org }).forUpdate().select('org');
  // A copy is stored at its event's time: the batch's own span is all there is to look at. A
  // time no Date holds (Keycloak's to give) bounds nothing here; its record is refused alone.
  const [from, to] = [new Date(since), new Date(until)];
  const written: { id: string }[] = await trx(AUDIT_TABLE)
    .where({ org })
    .modify((query) => {
      if (!Number.isNaN(from.getTime() + to.getTime())) void query.whereBetween('at', [from, to]);
    })
    .whereLike('action', 'keycloak.%')
    .whereRaw(`details->>'keycloakEventId' in (${ids.map(() => '?').join(', ')})`, ids)
    .select(trx.raw(`details->>'keycloakEventId' as id`));
  if (written.length === 0) return events;
  const found = new Set(written.map((row) => row.id));
  return events.filter((event) => {
    const id = keycloakEventIdOf(event);
    return id === undefined || !found.has(cleaned(id));
  });
}

/**
 * A record no row can be made of (a time past what a Date holds: a Keycloak event's is
 * Keycloak's): whatever the attempt, so the writer loses it as one the database refuses for good
 * (audit-writer.ts), instead of trying its batch again for ever. `code`: the error's name
 * (`RangeError`), logged where a refusal's SQLSTATE is.
 */
export class UnwritableRecordError extends Error {
  readonly code: string;
  constructor(cause: unknown) {
    super('audit record: no row can be made of it', { cause });
    this.name = 'UnwritableRecordError';
    this.code = cause instanceof Error ? cause.name : 'Error';
  }
}

type RowMaker = ReturnType<typeof createRowMaker>;

/**
 * Makes a record's row of a batch: its chained fields (audit-chain.ts `chainedFieldsOf`). The
 * work per record is off the request path but still the gateway's CPU: a record is serialised
 * once, from the recorded event with no record object made of it; a token's `jti` is hashed
 * once however many calls it makes, and one time text serves the records of one millisecond.
 */
function createRowMaker() {
  const jtiHashes = new Map<string, string>();
  let lastMs = NaN;
  let lastAt = '';
  const jtiSha256 = (tokenId: string) => {
    let hashed = jtiHashes.get(tokenId);
    if (hashed === undefined) {
      // Bounded: a flood of one-call tokens empties it now and then.
      if (jtiHashes.size >= 10_000) jtiHashes.clear();
      hashed = sha256Hex(tokenId);
      jtiHashes.set(tokenId, hashed);
    }
    return hashed;
  };
  return {
    rowOf(event: AuditEvent): string {
      try {
        if (event.atMs !== lastMs) {
          // Kept once made: a time that throws must throw again, not take the last one's text.
          lastAt = new Date(event.atMs).toISOString();
          lastMs = event.atMs;
        }
        const jti = event.tokenId === undefined ? null : jtiSha256(event.tokenId);
        const fields = chainedFieldsOf(event, lastAt, jti);
        // JSON writes a NUL or a lone surrogate only as a `\u` escape: without one, the record
        // is stored exactly as hashed (the rare text with one is cleaned and serialised again).
        return fields.includes('\\u') ? chainedFieldsOf(storable(event), lastAt, jti) : fields;
      } catch (err) {
        throw new UnwritableRecordError(err);
      }
    },
  };
}

/**
 * What PostgreSQL stores exactly as hashed: text without NUL (refused in text and jsonb, which
 * would hold the whole log back) and without lone surrogates (stored as U+FFFD, which would no
 * longer match the hash). A client's user name or path may carry either.
 */
// eslint-disable-next-line no-control-regex -- NUL is what PostgreSQL refuses.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

const cleaned = (value: string) => value.replace(UNSTORABLE, '\uFFFD');

function storable<T extends Record<string, unknown>>(fields: T): T {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') out[name] = cleaned(value);
    else if (name === 'details') {
      out[name] = Object.fromEntries(
        Object.entries(value as Record<string, string | string[]>).map(([key, v]) => [
          cleaned(key),
          Array.isArray(v) ? v.map(cleaned) : cleaned(v),
        ]),
      );
    } else out[name] = value;
  }
  return out as T;
}
