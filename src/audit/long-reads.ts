import { AppError } from '../envelope/errors.ts';

/**
 * What a refused long read is told to wait: an export takes seconds to minutes, so sooner
 * would only be refused again.
 */
export const LONG_READS_RETRY_AFTER_SECONDS = 10;

/** A place among the long reads running; given back once, however often `release` is called. */
export interface LongReadSlot {
  release(): void;
}

/**
 * A page of the log (a few statements, each bounded by DATABASE_STATEMENT_TIMEOUT_MS), or a
 * streamed read (an export, a download, a download job's run), which lasts as long as its client
 * takes to read it: its reads, and up to PROXY_ANSWER_DEADLINE_SECONDS of waits on its client.
 */
export type LongReadKind = 'page' | 'stream';

/**
 * The long audit reads (pages of the log, exports, downloads, download job runs) this process
 * runs at once. Each holds a connection of the pool (DATABASE_POOL_SIZE): a page for its
 * statements, up to DATABASE_STATEMENT_TIMEOUT_MS each, an export for each of its chunks, a
 * chunk up to DATABASE_SPARED_TIMEOUT_MS: unbounded, a few of them leave every request waiting
 * for one.
 */
export interface LongReads {
  /**
   * A slot now for a read of `holder` (the caller's organization), else 429 `auditReadsBusy`
   * with Retry-After: a request does not wait. See `createLongReads` for who gets one.
   */
  take(holder?: string, kind?: LongReadKind): LongReadSlot;
  /**
   * A slot for a streamed read once one is free to streamed reads, before any request takes it:
   * a download job waits its turn.
   */
  wait(): Promise<LongReadSlot>;
}

/**
 * `slots` long reads at once. A holder has all but one of them at most, so one organization's
 * readers never take them all; without a holder, the slots free bound it alone. Streamed reads
 * leave one slot to page reads, of the process's and of each holder's share: slowly read
 * exports, whoever's, would otherwise leave every page read refused for minutes. A share
 * is never below one: a process with one slot lends it to whoever comes first, and with two, a
 * holder's export is its whole share.
 */
export function createLongReads(slots: number): LongReads {
  const kept = slots > 1 ? 1 : 0;
  const share = Math.max(1, slots - 1);
  const streamsAtMost = slots - kept;
  const streamShare = Math.max(1, share - kept);
  let free = slots;
  let streams = 0;
  const heldBy = new Map<string, { all: number; streams: number }>();
  const waiting: ((slot: LongReadSlot) => void)[] = [];
  const count = (holder: string | undefined, kind: LongReadKind, by: 1 | -1) => {
    free -= by;
    if (kind === 'stream') streams += by;
    if (holder === undefined) return;
    const held = heldBy.get(holder) ?? { all: 0, streams: 0 };
    held.all += by;
    if (kind === 'stream') held.streams += by;
    if (held.all === 0) heldBy.delete(holder);
    else heldBy.set(holder, held);
  };
  const slot = (holder: string | undefined, kind: LongReadKind): LongReadSlot => {
    let held = true;
    count(holder, kind, 1);
    return {
      release() {
        if (!held) return;
        held = false;
        count(holder, kind, -1);
        // A waiting job before any request: it was there first.
        if (waiting.length > 0 && free > 0 && streams < streamsAtMost) {
          waiting.shift()!(slot(undefined, 'stream'));
        }
      },
    };
  };
  return {
    take(holder, kind = 'page') {
      const held = holder === undefined ? undefined : heldBy.get(holder);
      const room =
        free > 0 &&
        (held?.all ?? 0) < share &&
        (kind === 'page' || (streams < streamsAtMost && (held?.streams ?? 0) < streamShare));
      if (!room) {
        throw new AppError('auditReadsBusy', {
          headers: { 'retry-after': String(LONG_READS_RETRY_AFTER_SECONDS) },
        });
      }
      return slot(holder, kind);
    },
    wait() {
      if (free > 0 && streams < streamsAtMost) return Promise.resolve(slot(undefined, 'stream'));
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** `lines` holding `slot` until they end, fail or are given up (the client went). */
export async function* holding<T>(slot: LongReadSlot, lines: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    yield* lines;
  } finally {
    slot.release();
  }
}

/** `read`'s answer, under a page read's slot of `holder`'s taken now, given back once answered. */
export async function readUnderSlot<T>(
  reads: LongReads,
  read: () => Promise<T>,
  holder: string,
): Promise<T> {
  const slot = reads.take(holder);
  try {
    return await read();
  } finally {
    slot.release();
  }
}

/**
 * Runs `open` under a streamed read's slot of `holder`'s taken now; what it opens holds the slot
 * until it is read to its end, and gives it back at once if opening fails.
 */
export async function underSlot<T>(
  reads: LongReads,
  open: () => Promise<AsyncIterable<T>>,
  holder?: string,
): Promise<AsyncGenerator<T>> {
  const slot = reads.take(holder, 'stream');
  try {
    return holding(slot, await open());
  } catch (err) {
    slot.release();
    throw err;
  }
}
