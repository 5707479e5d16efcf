/** A small string key/value store with per-entry expiry, backed by Redis or process memory. */
export interface Cache {
  readonly kind: 'redis' | 'memory';
  get(key: string): Promise<string | undefined>;
  /** ttlMs must be > 0; values are strings (callers serialise). */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Resolves when the backend is reachable, rejects otherwise (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
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
