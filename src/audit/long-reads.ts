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
 * The long audit reads (pages of the log, exports, downloads, download job runs) this process
 * runs at once. Each holds a connection of the pool (DATABASE_POOL_SIZE): a page for its
 * statements, up to DATABASE_STATEMENT_TIMEOUT_MS each, an export for each of its chunks, a
 * chunk up to DATABASE_SPARED_TIMEOUT_MS: unbounded, a few of them leave every request waiting
 * for one.
 */
export interface LongReads {
  /**
   * A slot now for a read of `holder` (the caller's organization), else 429 `auditReadsBusy`
   * with Retry-After: a request does not wait. A holder has all but one of the slots at most,
   * so one organization's readers never take them all (a process with one slot lends it to
   * whoever comes first); without a holder, the slots free bound it alone.
   */
  take(holder?: string): LongReadSlot;
  /** A slot once one is free, before any request takes it: a download job waits its turn. */
  wait(): Promise<LongReadSlot>;
}

export function createLongReads(slots: number): LongReads {
  const share = Math.max(1, slots - 1);
  let free = slots;
  const heldBy = new Map<string, number>();
  const waiting: ((slot: LongReadSlot) => void)[] = [];
  const slot = (holder?: string): LongReadSlot => {
    let held = true;
    return {
      release() {
        if (!held) return;
        held = false;
        if (holder !== undefined) {
          const left = heldBy.get(holder)! - 1;
          if (left === 0) heldBy.delete(holder);
          else heldBy.set(holder, left);
        }
        const next = waiting.shift();
        if (next) next(slot());
        else free += 1;
      },
    };
  };
  return {
    take(holder) {
      const holds = holder === undefined ? 0 : (heldBy.get(holder) ?? 0);
      if (free === 0 || holds >= share) {
        throw new AppError('auditReadsBusy', {
          headers: { 'retry-after': String(LONG_READS_RETRY_AFTER_SECONDS) },
        });
      }
      free -= 1;
      if (holder !== undefined) heldBy.set(holder, holds + 1);
      return slot(holder);
    },
    wait() {
      if (free > 0) {
        free -= 1;
        return Promise.resolve(slot());
      }
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

/** `read`'s answer, under a slot of `holder`'s taken now and given back once it is answered. */
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
 * Runs `open` under a slot of `holder`'s taken now; what it opens holds the slot until it is
 * read to its end, and gives it back at once if opening fails.
 */
export async function underSlot<T>(
  reads: LongReads,
  open: () => Promise<AsyncIterable<T>>,
  holder?: string,
): Promise<AsyncGenerator<T>> {
  const slot = reads.take(holder);
  try {
    return holding(slot, await open());
  } catch (err) {
    slot.release();
    throw err;
  }
}
