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
 * The long audit reads (exports, downloads, download job runs) this process runs at once.
 * Each holds a connection of the pool (DATABASE_POOL_SIZE) for each of its chunks, a chunk up
 * to DATABASE_SPARED_TIMEOUT_MS: unbounded, a few of them leave every request waiting for one.
 */
export interface LongReads {
  /** A slot now, else 429 `auditReadsBusy` with Retry-After: a request does not wait. */
  take(): LongReadSlot;
  /** A slot once one is free, before any request takes it: a download job waits its turn. */
  wait(): Promise<LongReadSlot>;
}

export function createLongReads(slots: number): LongReads {
  let free = slots;
  const waiting: ((slot: LongReadSlot) => void)[] = [];
  const slot = (): LongReadSlot => {
    let held = true;
    return {
      release() {
        if (!held) return;
        held = false;
        const next = waiting.shift();
        if (next) next(slot());
        else free += 1;
      },
    };
  };
  return {
    take() {
      if (free === 0) {
        throw new AppError('auditReadsBusy', {
          headers: { 'retry-after': String(LONG_READS_RETRY_AFTER_SECONDS) },
        });
      }
      free -= 1;
      return slot();
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

/**
 * Runs `open` under a slot taken now; what it opens holds the slot until it is read to its end,
 * and gives it back at once if opening fails.
 */
export async function underSlot<T>(
  reads: LongReads,
  open: () => Promise<AsyncIterable<T>>,
): Promise<AsyncGenerator<T>> {
  const slot = reads.take();
  try {
    return holding(slot, await open());
  } catch (err) {
    slot.release();
    throw err;
  }
}
