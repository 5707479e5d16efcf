/** A small string key/value store with per-entry expiry, backed by Redis or process memory. */
export interface Cache {
  readonly kind: 'redis' | 'memory';
  get(key: string): Promise<string | undefined>;
  /** ttlMs must be > 0; values are strings (callers serialise). */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /**
   * Adds `by` (default 1; may be negative) to the counter under `key`, which starts at 0 for
   * `windowMs` when absent and keeps its first expiry after that (a fixed window). Resolves to
   * the new count and the time left.
   */
  increment(key: string, windowMs: number, by?: number): Promise<Counter>;
  /**
   * Stores `key` for `ttlMs` unless it is there: true when this call stored it (the first to
   * claim it in its lifetime), false when it was there already. One command in Redis. The
   * in-process store is bounded and never forgets a live claim: when it cannot take a new one
   * it rejects with ClaimRefused, which is neither answer (`owner` names whose claim it is, so
   * one owner cannot take the whole bound; Redis ignores it).
   */
  claim(key: string, ttlMs: number, owner?: string): Promise<boolean>;
  /** The counter under `key` as `increment` left it, or undefined when absent or expired. */
  counter(key: string): Promise<Counter | undefined>;
  /** Resolves when the backend is reachable, rejects otherwise (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * What serves in Redis' place while it fails (fallback-cache.ts): this process's memory, or the
 * supervising process's that the workers of one gateway share (ipc-cache.ts).
 */
export interface LocalCache extends Cache {
  /**
   * Until when (epoch ms) a claim this cache granted may still be held, by whichever process
   * made it: a key Redis lets claim before then may have been claimed here during an outage.
   */
  claimsHeldUntil(): number;
}

/** Why a bounded store of claims could not take a new one (memory-cache.ts). */
export type ClaimRefusal =
  /** Every claim it may hold is live. */
  | 'full'
  /** The store is under pressure and this claim's owner holds more than its share of it. */
  | 'owner_share';

/** A claim the in-process store could not take: not a claim made before, a store without room. */
export class ClaimRefused extends Error {
  readonly reason: ClaimRefusal;
  constructor(reason: ClaimRefusal) {
    super(
      reason === 'full'
        ? 'the in-process store of claims is full'
        : 'the owner holds its share of the in-process store of claims',
    );
    this.name = 'ClaimRefused';
    this.reason = reason;
  }
}

/** A windowed counter: how many so far, and how long until it starts again from 0. */
export interface Counter {
  count: number;
  ttlMs: number;
}

/**
 * Rejects TTLs that would mean "never expire" or "already expired", so both backends fail the
 * same way instead of Redis erroring while memory silently keeps the entry.
 */
export function assertValidTtl(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs <= 0) {
    throw new RangeError(`cache ttlMs must be a positive integer, got ${ttlMs}`);
  }
}
