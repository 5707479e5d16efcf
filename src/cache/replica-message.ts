import type { z } from 'zod';

/**
 * A payload of a replica channel as `schema` declares its messages, or undefined when it is not
 * one. Anyone with access to Redis can publish, so a payload is hostile input like a request:
 * read against the channel's one schema before anything acts on it. Members the schema does not
 * name are dropped, not refused, so that a replica of the next release may add one.
 */
export function readReplicaMessage<T>(payload: string, schema: z.ZodType<T>): T | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  const read = schema.safeParse(value);
  return read.success ? read.data : undefined;
}
