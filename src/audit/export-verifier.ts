import type { JSONWebKeySet } from 'jose';
import {
  CANONICAL_LAYOUT,
  createChainFollower,
  GENESIS_HASH,
  type AuditRecord,
} from './audit-chain.ts';
import {
  checkpointMisfit,
  endMisfit,
  type Checkpoint,
  type ExportEnd,
} from './audit-checkpoints.ts';

/**
 * A JSON Lines export (docs/audit.md) holds three kinds of line: first the public keys of the
 * gateway (`{"type":"keys","keys":[JWK...]}`), then the records, each as stored (no `type`),
 * with each checkpoint right after the record it names (`{"type":"checkpoint",...}`); a
 * checkpoint of the record just before the first one comes before it (the anchor). The last line
 * says what the export holds (`{"type":"end",...}`, audit-checkpoints.ts): without it, it was cut short.
 */
export type ExportLine =
  | { type: 'keys'; keys: JSONWebKeySet['keys'] }
  | ({ type: 'checkpoint' } & Checkpoint)
  | AuditRecord
  | ({ type: 'end' } & ExportEnd);

export const keysLine = (keys: JSONWebKeySet): string =>
  `${JSON.stringify({ type: 'keys', keys: keys.keys })}\n`;

export const checkpointLine = (checkpoint: Checkpoint): string =>
  `${JSON.stringify({ type: 'checkpoint', ...checkpoint })}\n`;

/** What a whole export proved. */
export interface Verified {
  records: number;
  org: string | null;
  firstSeq: number | null;
  /** The first record's `prevHash`: the hash of the record before it, in the export before. */
  firstPrevHash: string | null;
  lastSeq: number | null;
  /** The hash of the last record: what the next export's first `prevHash` must be. */
  lastHash: string | null;
  /** Checkpoints whose signature and record were checked. */
  checkpoints: number;
  /**
   * The first record's `prevHash` is vouched for: it is the log's first record, or a checkpoint
   * of the record before it is in the export (retention removed what came before).
   */
  anchored: boolean;
  /** The last record a checkpoint covers; records after it are chained but not yet signed. */
  signedThrough: number | null;
  /**
   * Whose keys checked the signatures: the auditor's (`pinned`), or the export's own keys line
   * (`export`), which proves the file whole but not that the gateway signed it: anyone can make a
   * key. Null when nothing was signed.
   */
  keys: 'pinned' | 'export' | null;
}

/** The first line that does not fit, and why. */
export class ExportMisfit extends Error {
  readonly line: number;
  constructor(line: number, message: string) {
    super(message);
    this.line = line;
  }
}

/**
 * Follows an export line by line (any size: it keeps the last record, not the file). `pinned`:
 * the keys to verify with (the gateway's published ones, which an auditor should pin); without
 * them, the export's own keys line. Each step throws an ExportMisfit naming the first record or
 * checkpoint that does not fit.
 */
export function createExportVerifier(pinned?: JSONWebKeySet): {
  line(value: unknown, line: number): Promise<void>;
  finish(): Verified;
} {
  const follower = createChainFollower();
  let keys = pinned;
  let last: AuditRecord | undefined;
  let anchor: { checkpoint: Checkpoint; line: number } | undefined;
  let lastLine = 0;
  let lastRecordLine = 0;
  let ended: number | undefined;
  const verified: Verified = {
    records: 0,
    org: null,
    firstSeq: null,
    firstPrevHash: null,
    lastSeq: null,
    lastHash: null,
    checkpoints: 0,
    anchored: false,
    signedThrough: null,
    keys: null,
  };
  const checkedWith = pinned === undefined ? 'export' : 'pinned';

  async function checkpoint(value: Checkpoint, line: number): Promise<void> {
    const fail = (why: string) => {
      throw new ExportMisfit(line, `checkpoint ${value.seq} (line ${line}) does not fit: ${why}.`);
    };
    if (!isCheckpoint(value)) fail('it is not a checkpoint');
    const extra = fieldOutside(value, CHECKPOINT_FIELDS);
    if (extra !== undefined) {
      fail(`its field ${extra} is not covered by its signature (not as the gateway exports it)`);
    }
    if (keys === undefined) fail('no keys to verify it with (no keys line, no --keys)');
    const misfit = await checkpointMisfit(value, keys!);
    if (misfit !== undefined) fail(misfit);
    verified.keys = checkedWith;
    if (verified.org !== null && value.org !== verified.org) {
      fail(`it belongs to log ${value.org}, not ${verified.org}`);
    }
    if (last === undefined) {
      anchor = { checkpoint: value, line };
      return;
    }
    if (value.seq > last.seq) {
      fail(
        `it names record ${value.seq}, which the export lacks: records after ${last.seq} were removed`,
      );
    }
    if (value.seq < last.seq) fail(`it comes after record ${last.seq}, not after its own`);
    if (value.hash !== last.hash) fail(`record ${value.seq} does not have the hash it vouches for`);
    verified.checkpoints++;
    verified.signedThrough = value.seq;
  }

  function record(value: AuditRecord, line: number): void {
    if (!isRecord(value)) throw new ExportMisfit(line, `line ${line} is not an audit record.`);
    const fail = (why: string) => {
      throw new ExportMisfit(line, `record ${value.seq} (line ${line}) does not fit: ${why}.`);
    };
    const extra = fieldOutside(value, RECORD_FIELDS);
    if (extra !== undefined) {
      fail(`its field ${extra} is not covered by its hash (not as the gateway exports it)`);
    }
    const misfit = follower.next(value);
    if (misfit !== undefined) fail(misfit);
    if (last === undefined) {
      verified.org = value.org;
      verified.firstSeq = value.seq;
      verified.firstPrevHash = value.prevHash;
      verified.anchored = value.seq === 1 && value.prevHash === GENESIS_HASH;
      if (anchor !== undefined) {
        const { checkpoint: a } = anchor;
        if (a.org !== value.org) fail(`the checkpoint before it belongs to log ${a.org}`);
        if (a.seq !== value.seq - 1) {
          fail(`the checkpoint before it names record ${a.seq}: records were removed before it`);
        }
        if (a.hash !== value.prevHash)
          fail('its prevHash is not the one the checkpoint before it vouches for');
        verified.anchored = true;
        verified.checkpoints++;
      }
    }
    last = value;
    lastRecordLine = line;
    verified.records++;
    verified.lastSeq = value.seq;
    verified.lastHash = value.hash;
  }

  async function end(value: ExportEnd, line: number): Promise<void> {
    const fail = (why: string) => {
      throw new ExportMisfit(line, `the end line (line ${line}) does not fit: ${why}.`);
    };
    if (!isEnd(value)) fail('it is not an end line');
    if (verified.org !== null && value.org !== verified.org) {
      fail(`it belongs to log ${value.org}, not ${verified.org}`);
    }
    const { records, firstSeq, lastSeq, lastHash } = verified;
    if (
      value.records !== records ||
      value.firstSeq !== firstSeq ||
      value.lastSeq !== lastSeq ||
      value.hash !== lastHash
    ) {
      fail(
        `it says ${value.records} records, ${value.firstSeq} to ${value.lastSeq}, and the export ` +
          `holds ${records}, ${firstSeq} to ${lastSeq}: records were removed or added`,
      );
    }
    // Once the export is signed (its keys, or the auditor's), so is its end: an unsigned one
    // is what anyone who cut the file could write.
    if (value.jws === undefined && keys !== undefined) {
      fail('it is not signed, and the export is (a keys line, or --keys)');
    }
    if (value.jws !== undefined) {
      if (keys === undefined) fail('no keys to verify it with (no keys line, no --keys)');
      const misfit = await endMisfit(value as ExportEnd & { kid: string; jws: string }, keys!);
      if (misfit !== undefined) fail(misfit);
      verified.keys = checkedWith;
    }
    ended = line;
  }

  return {
    async line(value, line) {
      if (ended !== undefined) {
        throw new ExportMisfit(line, `line ${line} comes after the end line (line ${ended}).`);
      }
      lastLine = line;
      const type = (value as { type?: unknown } | null)?.type;
      if (type === 'end') await end(value as ExportEnd, line);
      else if (type === 'keys') {
        const listed = (value as { keys?: unknown }).keys;
        if (!Array.isArray(listed))
          throw new ExportMisfit(line, `line ${line}: keys without a list.`);
        // Keys pinned by the auditor win over those the file brings.
        keys ??= { keys: listed as JSONWebKeySet['keys'] };
      } else if (type === 'checkpoint') await checkpoint(value as Checkpoint, line);
      else if (type === undefined) record(value as AuditRecord, line);
      else throw new ExportMisfit(line, `line ${line} is of an unknown type.`);
    },
    finish() {
      if (last === undefined && anchor !== undefined) {
        throw new ExportMisfit(
          anchor.line,
          `checkpoint ${anchor.checkpoint.seq} (line ${anchor.line}) does not fit: it names record ${anchor.checkpoint.seq}, which the export lacks: records were removed at the end.`,
        );
      }
      if (ended === undefined) {
        const where =
          verified.lastSeq === null
            ? 'it holds no record and no end line'
            : `it ends after record ${verified.lastSeq} (line ${lastRecordLine}) without its end line`;
        throw new ExportMisfit(
          lastLine,
          `the export is incomplete: ${where}: it was cut short (or made before exports had one); export it again.`,
        );
      }
      return verified;
    },
  };
}

const END_FIELDS = new Set(['type', 'org', 'firstSeq', 'lastSeq', 'records', 'hash', 'at']);

/**
 * The fields a record's hash covers and its hash; a checkpoint's signed claims, its key and
 * signature. Any other would pass verification and reach a reader (a SIEM, a person) as part of
 * a record or checkpoint that says nothing of it.
 */
const RECORD_FIELDS: ReadonlySet<string> = new Set([
  ...CANONICAL_LAYOUT.filter((name) => name !== 'version'),
  'hash',
]);
const CHECKPOINT_FIELDS: ReadonlySet<string> = new Set([
  'type',
  'org',
  'seq',
  'hash',
  'recordAt',
  'at',
  'kid',
  'jws',
] satisfies (keyof Checkpoint | 'type')[]);

/** The first field of `value` not in `allowed`. */
function fieldOutside(value: object, allowed: ReadonlySet<string>): string | undefined {
  return Object.keys(value).find((name) => !allowed.has(name));
}

function isEnd(value: unknown): value is ExportEnd {
  const e = value as Partial<ExportEnd> | null;
  const seqOrNull = (n: unknown) => n === null || (typeof n === 'number' && Number.isInteger(n));
  const signed = e?.jws !== undefined || e?.kid !== undefined;
  return (
    typeof e === 'object' &&
    e !== null &&
    Object.keys(e).every((name) => END_FIELDS.has(name) || name === 'kid' || name === 'jws') &&
    typeof e.org === 'string' &&
    seqOrNull(e.firstSeq) &&
    seqOrNull(e.lastSeq) &&
    typeof e.records === 'number' &&
    (e.hash === null || typeof e.hash === 'string') &&
    typeof e.at === 'string' &&
    (!signed || (typeof e.kid === 'string' && typeof e.jws === 'string'))
  );
}

function isRecord(value: unknown): value is AuditRecord {
  const record = value as Partial<AuditRecord> | null;
  return (
    typeof record === 'object' &&
    record !== null &&
    typeof record.hash === 'string' &&
    typeof record.seq === 'number' &&
    typeof record.details === 'object' &&
    record.details !== null &&
    !Array.isArray(record.details)
  );
}

function isCheckpoint(value: unknown): value is Checkpoint {
  const c = value as Partial<Checkpoint> | null;
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof c.org === 'string' &&
    typeof c.seq === 'number' &&
    typeof c.hash === 'string' &&
    typeof c.kid === 'string' &&
    typeof c.jws === 'string'
  );
}
