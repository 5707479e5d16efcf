import fc from 'fast-check';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashOf, verifyChain } from '../../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../../src/audit/audit-rows.ts';
import { createAuditWriter, type AuditEvent } from '../../../src/audit/audit-writer.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { apiEvent } from '../../helpers/audit-records.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';
import { EVENTUALLY } from '../../helpers/eventually.ts';

function event(org: string, n: number): AuditEvent {
  return apiEvent(org, Date.UTC(2026, 10, 1) + n, {
    actorName: `user${n}`,
    tokenId: `jti-${n}`,
    requestId: `r${n}`,
    details: { n: String(n) },
  });
}

/** The writer's counts, as the metrics get them. */
function counting() {
  const counts = { written: 0, lost: 0 };
  return {
    counts,
    metrics: { auditRecords: (outcome: 'written' | 'lost', n: number) => (counts[outcome] += n) },
  };
}

const logger = createLogger('silent');

/**
 * `db` as the writer sees it when the connection drops right after a commit, or just before one
 * (`drop` says which, for the next transaction): the transaction's outcome is real, then the
 * writer is told it failed.
 */
function droppingAround(db: Knex) {
  let next: 'after commit' | 'before commit' | undefined;
  const dropping = new Proxy(db, {
    get(target, name, receiver) {
      if (name !== 'transaction') return Reflect.get(target, name, receiver) as unknown;
      return async (work: (trx: Knex.Transaction) => Promise<unknown>) => {
        const when = next;
        next = undefined;
        const answer = await target.transaction(async (trx) => {
          const result = await work(trx);
          if (when === 'before commit') throw new Error('connection lost before the commit');
          return result;
        });
        if (when === 'after commit') throw new Error('connection lost after the commit');
        return answer;
      };
    },
  });
  return { db: dropping, drop: (when: 'after commit' | 'before commit') => (next = when) };
}

describe('the audit writer', () => {
  let db: Knex;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('audit-writer'));
  }, 120_000);

  afterAll(() => close());

  /** A writer of ten records a batch, written when flushed. */
  const smallWriter = () =>
    createAuditWriter({
      db,
      logger,
      metrics: counting().metrics,
      spoolMax: 10,
      batchMax: 10,
      intervalMs: 60_000,
    });

  it('writes each log in the order recorded, numbered and chained, in batches', async () => {
    const { counts, metrics } = counting();
    const writer = createAuditWriter({
      db,
      logger,
      metrics,
      spoolMax: 10_000,
      batchMax: 70,
      intervalMs: 60_000,
    });
    for (let n = 1; n <= 300; n++) writer.record(event(n % 3 === 0 ? 'globex' : 'acme', n));
    await writer.flush();
    expect(counts).toEqual({ written: 300, lost: 0 });
    for (const org of ['acme', 'globex']) {
      const rows = await db<AuditRow>('audit_log').where({ org }).orderBy('seq');
      const records = rows.map(recordOf);
      expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
      const order = records.map((r) => Number(r.details.n));
      expect(order).toEqual([...order].sort((a, b) => a - b));
      expect(verifyChain(records)).toBeUndefined();
    }
    const first = recordOf((await db<AuditRow>('audit_log').where({ org: 'acme', seq: 1 }))[0]!);
    // The token's jti is kept as its SHA-256 only.
    expect(first.jtiSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(first)).not.toContain('jti-1');
    await writer.close(1000);
  });

  it("writes a batch larger than one statement's text as one chain, in order", async () => {
    const { counts, metrics } = counting();
    const writer = createAuditWriter({
      db,
      logger,
      metrics,
      spoolMax: 10_000,
      batchMax: 2_000,
      intervalMs: 60_000,
    });
    // About 600 bytes a row: a batch of 2,000 is a dozen statements in one transaction.
    for (let n = 1; n <= 2_000; n++) writer.record(event('initech', n));
    await writer.flush();
    expect(counts).toEqual({ written: 2_000, lost: 0 });
    const rows = await db<AuditRow>('audit_log').where({ org: 'initech' }).orderBy('seq');
    const records = rows.map(recordOf);
    expect(records.map((r) => Number(r.details.n))).toEqual(records.map((_, i) => i + 1));
    expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
    expect(verifyChain(records)).toBeUndefined();
    await writer.close(1000);
  });

  it('two writers taking turns on the same logs keep each one chain, whichever wrote last', async () => {
    // Each writer chains a batch from where it last left a log; when the other writer has
    // appended since, that batch must leave nothing (not even the head of a log it could have
    // appended to) and be written after the other's records.
    const writers = [1, 2].map(() =>
      createAuditWriter({
        db,
        logger,
        metrics: counting().metrics,
        spoolMax: 1000,
        batchMax: 1000,
        intervalMs: 60_000,
      }),
    );
    let n = 0;
    for (const turn of [0, 0, 1, 0, 1, 1, 0]) {
      // Both logs in each of the first writer's batches, the second log alone in the other's.
      if (turn === 0) writers[0]!.record(event('turns-a', ++n));
      for (let i = 0; i < 3; i++) writers[turn]!.record(event('turns-b', ++n));
      await writers[turn]!.flush();
    }
    for (const org of ['turns-a', 'turns-b']) {
      const records = (await db<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(recordOf);
      expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
      const order = records.map((r) => Number(r.details.n));
      expect(order).toEqual([...order].sort((a, b) => a - b));
      expect(verifyChain(records)).toBeUndefined();
      const head = (await db('audit_log_heads').where({ org }).first()) as {
        seq: string | number;
        hash: string;
      };
      expect({ seq: Number(head.seq), hash: head.hash }).toEqual({
        seq: records.length,
        hash: records.at(-1)!.hash,
      });
    }
    const counted = await db('audit_log')
      .whereIn('org', ['turns-a', 'turns-b'])
      .count<{ c: string | number }[]>({ c: '*' });
    expect(Number(counted[0]!.c)).toBe(n);
    await Promise.all(writers.map((w) => w.close(1000)));
  });

  it("writes a Keycloak event once, though two writers' spools hold it", async () => {
    // A replica cut off from the database past its pull's lease keeps the pulled events in its
    // spool while another replica pulls them again: both writers then hold them.
    const pulled = (id: string, n: number): AuditEvent =>
      apiEvent('pulled', Date.UTC(2026, 10, 1) + n, {
        action: 'keycloak.login',
        credential: null,
        details: { source: 'keycloak', keycloakEventId: id, n: String(n) },
      });
    const counters = [counting(), counting()];
    const writers = counters.map(({ metrics }) =>
      createAuditWriter({ db, logger, metrics, spoolMax: 100, batchMax: 100, intervalMs: 60_000 }),
    );
    for (const [w, writer] of writers.entries()) {
      // The same events, between records of the writer's own.
      writer.record(event('pulled', 10 + w));
      for (let n = 1; n <= 3; n++) writer.record(pulled(`kc-${n}`, n));
      writer.record(event('pulled', 20 + w));
    }
    await writers[1]!.flush();
    await writers[0]!.flush();
    const records = (await db<AuditRow>('audit_log').where({ org: 'pulled' }).orderBy('seq')).map(
      recordOf,
    );
    expect(records.map((r) => r.details.keycloakEventId ?? r.details.n)).toEqual([
      '11',
      'kc-1',
      'kc-2',
      'kc-3',
      '21',
      '10',
      '20',
    ]);
    expect(verifyChain(records)).toBeUndefined();
    // Each counts what it wrote: the events once, by the writer that wrote them.
    expect(counters.map(({ counts }) => counts)).toEqual([
      { written: 2, lost: 0 },
      { written: 5, lost: 0 },
    ]);
    await Promise.all(writers.map((w) => w.close(1000)));
  });

  it("retries a batch of two logs whose first another writer wrote the same meanwhile: the second's records are written", async () => {
    // The first log's records of an attempt that did not commit, written as they were by
    // another writer (pulled Keycloak events both spools hold): only the second log's last
    // record tells the attempt did not commit.
    const pulled = (n: number): AuditEvent =>
      apiEvent('retry-a', Date.UTC(2026, 10, 1) + n, {
        action: 'keycloak.login',
        credential: null,
        details: { source: 'keycloak', keycloakEventId: `kc-retry-${n}`, n: String(n) },
      });
    const { db: dropping, drop } = droppingAround(db);
    drop('before commit');
    const spec = { logger, spoolMax: 100, batchMax: 100, intervalMs: 60_000 };
    const first = counting();
    const writer = createAuditWriter({ ...spec, db: dropping, metrics: first.metrics });
    const other = createAuditWriter({ ...spec, db, metrics: counting().metrics });
    for (const w of [writer, other]) for (let n = 1; n <= 2; n++) w.record(pulled(n));
    writer.record(event('retry-b', 1));
    writer.record(event('retry-b', 2));
    await expect(writer.flush()).rejects.toThrow('before the commit');
    await other.flush();
    await writer.flush();
    const of = async (org: string) =>
      (await db<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(recordOf);
    expect((await of('retry-a')).map((r) => r.details.keycloakEventId)).toEqual([
      'kc-retry-1',
      'kc-retry-2',
    ]);
    expect((await of('retry-b')).map((r) => r.details.n)).toEqual(['1', '2']);
    expect(first.counts).toEqual({ written: 2, lost: 0 });
    await Promise.all([writer, other].map((w) => w.close(1000)));
  });

  it('writes what came during a batch once it makes full batches, the rest at the tick or flush', async () => {
    // Each transaction waits until the test lets it go.
    const waiting: (() => void)[] = [];
    const held = new Proxy(db, {
      get(target, name, receiver) {
        if (name !== 'transaction') return Reflect.get(target, name, receiver) as unknown;
        return async (work: (trx: Knex.Transaction) => Promise<unknown>) => {
          await new Promise<void>((go) => waiting.push(go));
          return target.transaction(work);
        };
      },
    });
    const batches: number[] = [];
    const writer = createAuditWriter({
      db: held,
      logger,
      metrics: { auditRecords: (outcome, n) => outcome === 'written' && batches.push(n) },
      spoolMax: 1000,
      batchMax: 10,
      intervalMs: 60_000,
    });
    const letOneGo = async () => {
      await vi.waitFor(() => expect(waiting).toHaveLength(1), EVENTUALLY);
      waiting.shift()!();
    };
    // A full batch starts a write; 23 more come while it waits.
    for (let n = 1; n <= 33; n++) writer.record(event('trains', n));
    await letOneGo();
    await vi.waitFor(() => expect(batches).toEqual([10]), EVENTUALLY);
    // The two full batches among them follow; the last three wait.
    await letOneGo();
    await letOneGo();
    await vi.waitFor(() => expect(batches).toEqual([10, 10, 10]), EVENTUALLY);
    expect((await writer.readiness()).details).toMatchObject({ spooled: 3 });
    const flushed = writer.flush();
    await letOneGo();
    await flushed;
    expect(batches).toEqual([10, 10, 10, 3]);
    await writer.close(1000);
  });

  it('stores what a client sent that PostgreSQL cannot hold (NUL, a lone surrogate) as U+FFFD, hashed as stored', async () => {
    const writer = smallWriter();
    writer.record({
      ...event('hostile', 1),
      actorName: 'a\u0000b\uD800',
      details: { p: '\uDC00' },
    });
    await writer.flush();
    const rows = await db<AuditRow>('audit_log').where({ org: 'hostile' });
    const records = rows.map(recordOf);
    expect(records[0]).toMatchObject({ actorName: 'a\uFFFDb\uFFFD', details: { p: '\uFFFD' } });
    expect(verifyChain(records)).toBeUndefined();
    await writer.close(1000);
  });

  it('hashes a log name as stored too (a lone surrogate as U+FFFD)', async () => {
    const writer = smallWriter();
    writer.record(event('odd\uD800', 1));
    writer.record(event('odd\uD800', 2));
    await writer.flush();
    const rows = await db<AuditRow>('audit_log').where({ org: 'odd\uFFFD' }).orderBy('seq');
    expect(rows).toHaveLength(2);
    expect(verifyChain(rows.map(recordOf))).toBeUndefined();
    await writer.close(1000);
  });

  it('stores each record as the very bytes its hash was taken of, whatever text it holds', async () => {
    // Any text a client may send: control characters, quotes, backslashes, non-ASCII, emoji,
    // NUL and lone surrogates (stored as U+FFFD).
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary' }),
    );
    let org = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            actorName: fc.option(text),
            path: text,
            reason: fc.option(text),
            details: fc.dictionary(text, fc.oneof(text, fc.array(text))),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        async (fields) => {
          const log = `texts${++org}`;
          const writer = createAuditWriter({
            db,
            logger,
            metrics: counting().metrics,
            spoolMax: 100,
            batchMax: 3,
            intervalMs: 60_000,
          });
          fields.forEach((f, n) => writer.record({ ...event(log, n), ...f }));
          await writer.flush();
          await writer.close(1000);
          const rows = await db<AuditRow>('audit_log').where({ org: log }).orderBy('seq');
          const records = rows.map(recordOf);
          expect(records).toHaveLength(fields.length);
          for (const record of records) expect(hashOf(record)).toBe(record.hash);
          expect(verifyChain(records)).toBeUndefined();
        },
      ),
      { numRuns: 40 },
    );
    // 40 logs written through PostgreSQL one after the other: seconds on a busy machine.
  }, 60_000);

  it('a batch whose commit went through before its error is not written twice; one that did not commit is', async () => {
    const { db: dropping, drop } = droppingAround(db);
    const { counts, metrics } = counting();
    const writer = createAuditWriter({
      db: dropping,
      logger,
      metrics,
      spoolMax: 100,
      batchMax: 100,
      intervalMs: 60_000,
    });
    // Five at a time, each written by the flush that follows.
    for (let n = 1; n <= 5; n++) writer.record(event('unclear', n));
    drop('after commit');
    await expect(writer.flush()).rejects.toThrow('after the commit');
    for (let n = 6; n <= 10; n++) writer.record(event('unclear', n));
    await writer.flush();
    for (let n = 11; n <= 15; n++) writer.record(event('unclear', n));
    drop('before commit');
    await expect(writer.flush()).rejects.toThrow('before the commit');
    await writer.flush();
    const records = (await db<AuditRow>('audit_log').where({ org: 'unclear' }).orderBy('seq')).map(
      recordOf,
    );
    expect(records.map((r) => Number(r.details.n))).toEqual(
      Array.from({ length: 15 }, (_, i) => i + 1),
    );
    expect(verifyChain(records)).toBeUndefined();
    expect(counts).toEqual({ written: 15, lost: 0 });
    await writer.close(1000);
  });

  it('a flush returns once the records spooled when it was called are written, however many keep coming', async () => {
    // A database under load: each batch takes a few milliseconds (the embedded one answers
    // without giving the records' makers a turn).
    const slow = new Proxy(db, {
      get(target, name, receiver) {
        if (name !== 'transaction') return Reflect.get(target, name, receiver) as unknown;
        return async (work: (trx: Knex.Transaction) => Promise<unknown>) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          return target.transaction(work);
        };
      },
    });
    const writer = createAuditWriter({
      db: slow,
      logger,
      metrics: counting().metrics,
      spoolMax: 100_000,
      batchMax: 10,
      intervalMs: 60_000,
    });
    // Records keep coming, faster than batches of 10 are written, until the flush returns.
    let n = 0;
    let coming = true;
    const keepComing = () => {
      for (let i = 0; i < 10; i++) writer.record(event('steady', ++n));
      if (coming) setTimeout(keepComing, 1);
    };
    keepComing();
    // Writes are under way when the flush is called.
    await new Promise((resolve) => setTimeout(resolve, 30));
    const spooledBefore = n;
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<'stuck'>((resolve) => (timer = setTimeout(resolve, 15_000, 'stuck')));
    const flushed = await Promise.race([writer.flush().then(() => 'flushed' as const), stuck]);
    coming = false;
    clearTimeout(timer);
    expect(flushed).toBe('flushed');
    const written = await db<AuditRow>('audit_log')
      .where({ org: 'steady' })
      .count<{ count: string | number }[]>({ count: '*' });
    expect(Number(written[0]!.count)).toBeGreaterThanOrEqual(spooledBefore);
    await writer.close(60_000);
  }, 60_000);

  it('keeps records while the database is down, loses and counts what the spool cannot hold', async () => {
    // A port nothing listens on: every write is refused at once.
    const quiet = () => undefined;
    const down = knex({
      client: 'pg',
      connection: 'postgres://postgres@127.0.0.1:1/none',
      log: { warn: quiet, error: quiet, deprecate: quiet, debug: quiet },
    });
    const { counts, metrics } = counting();
    const writer = createAuditWriter({
      db: down,
      logger,
      metrics,
      spoolMax: 100,
      batchMax: 10,
      intervalMs: 60_000,
    });
    for (let n = 1; n <= 130; n++) writer.record(event('acme', n));
    await expect(writer.flush()).rejects.toThrow();
    expect(counts).toEqual({ written: 0, lost: 30 });
    expect(await writer.readiness()).toEqual({
      status: 'degraded',
      details: { spooled: 100, lost: 30 },
    });
    await writer.close(0);
    expect(counts.lost).toBe(130);
    await down.destroy();
  });
  it('tells the caller whether it took a record: not when the spool is full, nor after close; a refused offer is no loss', async () => {
    const quiet = () => undefined;
    const down = knex({
      client: 'pg',
      connection: 'postgres://postgres@127.0.0.1:1/none',
      log: { warn: quiet, error: quiet, deprecate: quiet, debug: quiet },
    });
    const { counts, metrics } = counting();
    const writer = createAuditWriter({
      db: down,
      logger,
      metrics,
      spoolMax: 5,
      batchMax: 10,
      intervalMs: 60_000,
    });
    // What a caller offers again later (pulled Keycloak events) is no loss when refused.
    const offered = Array.from({ length: 6 }, (_, n) => writer.offer(event('acme', n)));
    expect(offered).toEqual([true, true, true, true, true, false]);
    expect(counts.lost).toBe(0);
    expect((await writer.readiness()).details).toMatchObject({ lost: 0 });
    const taken = Array.from({ length: 2 }, (_, n) => writer.record(event('acme', 6 + n)));
    expect(taken).toEqual([false, false]);
    expect(counts.lost).toBe(2);
    await writer.close(0);
    expect(writer.record(event('acme', 8))).toBe(false);
    await down.destroy();
  });
});
