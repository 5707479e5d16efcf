import type { JSONWebKeySet } from 'jose';
import type { Knex } from 'knex';
import type { AuditRecord } from './audit-chain.ts';
import type { Checkpoint, CheckpointSigner } from './audit-checkpoints.ts';
import { checkpointOf, CHECKPOINTS_TABLE } from './audit-checkpointer.ts';
import { jsonLine } from './audit-export.ts';
import { endLine, exportSpan, signedEnd } from './export-end.ts';
import { checkpointLine, keysLine } from './export-verifier.ts';

/** Checkpoints read at once by an export. */
const CHUNK = 1000;

/** What makes a JSON Lines export verifiable offline: the published keys and the checkpoints. */
export interface ExportSignatures {
  /** The published keys; `current`: as they are now, not as a cache last saw them. */
  keys(read?: { current: true }): Promise<JSONWebKeySet>;
  /** The seq of the last checkpoint of `org` (0: none). */
  lastSigned(org: string): Promise<number>;
  /** The checkpoints of `org` from `fromSeq` through `toSeq`, in order. */
  checkpoints(org: string, fromSeq: number, toSeq: number): AsyncIterable<Checkpoint>;
  /** The gateway's key, which signs the export's end line (export-end.ts). */
  signer(): Promise<CheckpointSigner>;
  now(): number;
}

/** The checkpoints as the database holds them, read a chunk at a time. */
export function storedCheckpoints(db: Knex): Pick<ExportSignatures, 'lastSigned' | 'checkpoints'> {
  return { lastSigned, checkpoints };

  async function lastSigned(org: string): Promise<number> {
    const [last] = await db(CHECKPOINTS_TABLE)
      .where({ org })
      .max<{ max: unknown }[]>({ max: 'seq' });
    return Number(last?.max ?? 0);
  }

  async function* checkpoints(org: string, fromSeq: number, toSeq: number) {
    let after = fromSeq - 1;
    for (;;) {
      const query = db(CHECKPOINTS_TABLE)
        .where({ org })
        .where('seq', '>', after)
        .where('seq', '<=', toSeq);
      const rows = (await query.orderBy('seq').limit(CHUNK)) as Record<string, unknown>[];
      for (const row of rows) yield checkpointOf(row);
      if (rows.length < CHUNK) return;
      after = Number(rows.at(-1)!.seq);
    }
  }
}

/**
 * A JSON Lines export of `org`'s log with what verifies it (export-verifier.ts): the keys, then the
 * records, each checkpoint right after the record it names; a checkpoint of the record before
 * the first comes first (it vouches for the first `prevHash`), and one of a record the export
 * lacks comes where that record would be, or at the end: there the verifier finds it. Last, the
 * end line, signed: what the export holds, so that one cut short (its lines whole) is told from
 * a whole one. `lastSeq`: the last record the export covers (its span's), past which no
 * checkpoint is its.
 */
export async function* signedJsonLines(
  org: string,
  records: AsyncIterable<AuditRecord>,
  signatures: ExportSignatures,
  lastSeq: number,
): AsyncGenerator<string> {
  // Read before the records: a checkpoint made while the export runs may sign records after
  // its last, and would look like records cut off.
  const through = await signatures.lastSigned(org);
  // The key of the end line is stored before the keys are read (openCheckpointSigner), as is
  // that of every checkpoint through `through`, a replica's new one included.
  const signer = await signatures.signer();
  yield keysLine(await signatures.keys({ current: true }));
  const span = exportSpan(org);
  let checkpoints: AsyncIterator<Checkpoint> | undefined;
  let next: Checkpoint | undefined;
  const advance = async () => {
    const step = await checkpoints!.next();
    next = step.done ? undefined : step.value;
  };
  for await (const record of records) {
    if (checkpoints === undefined) {
      const range = signatures.checkpoints(org, record.seq - 1, Math.min(through, lastSeq));
      checkpoints = range[Symbol.asyncIterator]();
      await advance();
    }
    while (next !== undefined && next.seq < record.seq) {
      yield checkpointLine(next);
      await advance();
    }
    span.saw(record);
    yield jsonLine(record);
    while (next !== undefined && next.seq === record.seq) {
      yield checkpointLine(next);
      await advance();
    }
  }
  while (next !== undefined) {
    yield checkpointLine(next);
    await advance();
  }
  yield endLine(await signedEnd(signer, span.claims(new Date(signatures.now()).toISOString())));
}
