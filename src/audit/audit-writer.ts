import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ReadinessReport } from '../http/health.router.ts';
import { canonicalOf, GENESIS_HASH, sha256Hex, type AuditRecord } from './audit-chain.ts';
import { AUDIT_TABLE, batchRowOf, HEADS_TABLE, INSERT_BATCH } from './audit-rows.ts';

/**
 * What the recording code hands the writer: a record's fields, chosen where it happened, without
 * its place in the log (seq, hashes) and with its time as epoch ms; `tokenId` (a token's `jti`)
 * is kept only as its SHA-256, computed by the writer, off the request path.
 */
export type AuditEvent = Omit<AuditRecord, 'seq' | 'at' | 'prevHash' | 'hash' | 'jtiSha256'> & {
  atMs: number;
  tokenId?: string | undefined;
};

/** What the writer counts (metrics/metrics.ts implements it). */
export interface AuditMetrics {
  /** Records written to the database, or lost (the spool full, or shutdown while it was down). */
  auditRecords(outcome: 'written' | 'lost', count: number): void;
}

export interface AuditWriter {
  /** Spools one record; it is written in the next batch. Never waits, never throws. */
  record(event: AuditEvent): void;
  /** Writes everything spooled until now; rejects when the database refuses. */
  flush(): Promise<void>;
  /** For readiness: degraded while records wait for the database, or once any was lost. */
  readiness(): Promise<ReadinessReport>;
  /** Writes what is spooled (for up to `graceMs`), then stops. */
  close(graceMs: number): Promise<void>;
}

interface Spooled {
  id: string;
  event: AuditEvent;
}

/**
 * The one writer of a process's audit records: they wait in a spool (memory, at most
 * `spoolMax`) and are written in batches of up to `batchMax`, every `intervalMs` or as soon as
 * a batch is full, in the order they were recorded. While the database is down they stay in the
 * spool and are written, still in order, once it is back; a record that finds the spool full is
 * lost, counted and said in readiness.
 *
 * Each batch is one transaction. Per log (in name order, so two writers never wait on each
 * other crosswise) it locks the log's head row, numbers the records after it, chains their
 * hashes and moves the head: writers of several replicas append to one log one batch after the
 * other, and the log keeps one order and one chain. A batch retried after an error that may have
 * followed its commit skips the records already there (their `id`).
 */
export function createAuditWriter(deps: {
  db: Knex;
  logger: Logger;
  metrics: AuditMetrics;
  spoolMax: number;
  batchMax: number;
  intervalMs: number;
}): AuditWriter {
  const { db, logger, metrics, spoolMax, batchMax } = deps;
  // A queue as an array and the index of its first: shifting 100,000 records one by one would
  // copy them every time.
  let spool: Spooled[] = [];
  let first = 0;
  let lost = 0;
  let writing: Promise<void> | undefined;
  let failing: unknown;
  let mayBeWritten = false;
  let closed = false;
  const size = () => spool.length - first;
  const rowMaker = createRowMaker();

  const timer = setInterval(() => {
    logLosses();
    void writeSpooled().catch(() => undefined);
  }, deps.intervalMs);
  timer.unref();

  // Losses are logged once a tick, not once a request: a full spool must not flood the log too.
  let unlogged: { count: number; why: string } | undefined;
  function lose(count: number, why: string): void {
    lost += count;
    metrics.auditRecords('lost', count);
    if (unlogged) unlogged.count += count;
    else unlogged = { count, why };
  }
  function logLosses(): void {
    if (!unlogged) return;
    logger.error(
      { audit: { lost: unlogged.count, lostSoFar: lost } },
      `audit records lost: ${unlogged.why}`,
    );
    unlogged = undefined;
  }

  /** Writes batches until the spool is empty; one run at a time. */
  function writeSpooled(): Promise<void> {
    if (writing) return writing;
    if (size() === 0) return Promise.resolve();
    // `finally` runs after the assignment: the run is known while it lasts.
    writing = writeBatches().finally(() => (writing = undefined));
    return writing;
  }

  async function writeBatches(): Promise<void> {
    while (size() > 0) {
      const batch = spool.slice(first, first + batchMax);
      try {
        await writeBatch(db, batch, mayBeWritten, rowMaker);
      } catch (err) {
        // Unknown whether it committed: the retry looks for its records first.
        mayBeWritten = true;
        if (failing === undefined) {
          logger.warn({ err, spooled: size() }, 'audit log: database unavailable; spooling');
        }
        failing = err;
        throw err;
      }
      mayBeWritten = false;
      if (failing !== undefined) logger.info({ spooled: size() }, 'audit log: writing again');
      failing = undefined;
      first += batch.length;
      metrics.auditRecords('written', batch.length);
      if (first > 1024 && first * 2 > spool.length) {
        spool = spool.slice(first);
        first = 0;
      }
    }
  }

  return {
    record(event) {
      if (closed || size() >= spoolMax) {
        lose(1, closed ? 'recorded after shutdown' : 'the spool is full');
        return;
      }
      spool.push({ id: randomUUID(), event });
      if (size() === batchMax && !writing) void writeSpooled().catch(() => undefined);
    },
    async flush() {
      // A run in progress may have started before the last records came: run once more.
      await writing?.catch(() => undefined);
      await writeSpooled();
    },
    readiness() {
      const details = { spooled: size(), lost };
      const status = failing !== undefined || lost > 0 ? 'degraded' : 'up';
      return Promise.resolve({ status, details });
    },
    async close(graceMs) {
      clearInterval(timer);
      let timeout: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timeout = setTimeout(resolve, graceMs)));
      try {
        await Promise.race([this.flush().catch(() => undefined), late]);
      } finally {
        clearTimeout(timeout);
        closed = true;
      }
      if (size() > 0) lose(size(), 'the database was unavailable at shutdown');
      logLosses();
    },
  };
}

/** Appends `batch` to the logs it belongs to, in one transaction (see createAuditWriter). */
async function writeBatch(
  db: Knex,
  batch: Spooled[],
  mayBeWritten: boolean,
  rowMaker: RowMaker,
): Promise<void> {
  await db.transaction(async (trx) => {
    let todo = batch;
    if (mayBeWritten) {
      const present = new Set(
        await trx(AUDIT_TABLE)
          .whereIn(
            'id',
            batch.map((s) => s.id),
          )
          .pluck('id'),
      );
      todo = batch.filter((s) => !present.has(s.id));
    }
    const byLog = new Map<string, Spooled[]>();
    for (const spooled of todo) {
      const log = byLog.get(spooled.event.org);
      if (log) log.push(spooled);
      else byLog.set(spooled.event.org, [spooled]);
    }
    for (const org of [...byLog.keys()].sort()) {
      await appendToLog(trx, org, byLog.get(org)!, rowMaker);
    }
  });
}

async function appendToLog(
  trx: Knex.Transaction,
  org: string,
  spooled: Spooled[],
  rowMaker: RowMaker,
): Promise<void> {
  await trx(HEADS_TABLE).insert({ org, seq: 0, hash: GENESIS_HASH }).onConflict('org').ignore();
  const head = (await trx(HEADS_TABLE).where({ org }).forUpdate().first()) as {
    seq: string | number;
    hash: string;
  };
  let seq = Number(head.seq);
  let prevHash = head.hash;
  const rows = new Array<string>(spooled.length);
  for (let i = 0; i < spooled.length; i++) {
    const { id, event } = spooled[i]!;
    const row = rowMaker.rowOf(id, event, ++seq, prevHash);
    rows[i] = row.text;
    prevHash = row.hash;
  }
  await trx.raw(INSERT_BATCH, [`[${rows.join(',')}]`]);
  await trx(HEADS_TABLE).where({ org }).update({ seq, hash: prevHash });
}

type RowMaker = ReturnType<typeof createRowMaker>;

/**
 * Makes a record's row of a batch (audit-rows.ts `batchRowOf`) and its hash. The work per
 * record is the writer's, off the request path, but still the gateway's CPU: a record is
 * serialised once (its canonical form is both hashed and sent), a token's `jti` is hashed once
 * however many calls it makes, and one time text serves the records of one millisecond.
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
    rowOf(id: string, event: AuditEvent, seq: number, prevHash: string) {
      if (event.atMs !== lastMs) {
        lastMs = event.atMs;
        lastAt = new Date(lastMs).toISOString();
      }
      let record: Omit<AuditRecord, 'hash'> = {
        org: event.org,
        seq,
        at: lastAt,
        action: event.action,
        outcome: event.outcome,
        actorRealm: event.actorRealm,
        actorId: event.actorId,
        actorName: event.actorName,
        credential: event.credential,
        clientId: event.clientId,
        jobCredential: event.jobCredential,
        jtiSha256: event.tokenId === undefined ? null : jtiSha256(event.tokenId),
        jkt: event.jkt,
        method: event.method,
        route: event.route,
        path: event.path,
        workspace: event.workspace,
        status: event.status,
        result: event.result,
        reason: event.reason,
        address: event.address,
        requestId: event.requestId,
        details: event.details,
        prevHash,
      };
      let canonical = canonicalOf(record);
      // JSON writes a NUL or a lone surrogate only as a `\u` escape: without one, the record is
      // stored exactly as hashed (the rare text with one is cleaned and serialised again).
      if (canonical.includes('\\u')) {
        record = storable(record);
        canonical = canonicalOf(record);
      }
      const hash = sha256Hex(canonical);
      return { hash, text: batchRowOf(id, hash, canonical) };
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

function storable<T extends Record<string, unknown>>(fields: T): T {
  const clean = (value: string) => value.replace(UNSTORABLE, '\uFFFD');
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') out[name] = clean(value);
    else if (name === 'details') {
      out[name] = Object.fromEntries(
        Object.entries(value as Record<string, string | string[]>).map(([key, v]) => [
          clean(key),
          Array.isArray(v) ? v.map(clean) : clean(v),
        ]),
      );
    } else out[name] = value;
  }
  return out as T;
}
