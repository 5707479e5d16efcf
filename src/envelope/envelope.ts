/**
 * The platform's JSON envelope: `{data, message, result, ts}` (spec 2.1).
 * Success is `message: "SUCCESS"`, `result: "000-00000"`.
 */
export interface Envelope<T> {
  data: T;
  message: string;
  result: string;
  ts: string;
}

export const SUCCESS_RESULT = '000-00000';

/** Wraps a payload in a success envelope. */
export function success<T>(data: T, now: Date = new Date()): Envelope<T> {
  return { data, message: 'SUCCESS', result: SUCCESS_RESULT, ts: now.toISOString() };
}

/** Builds an error envelope; `data` is null unless the error carries safe details. */
export function failure(
  result: string,
  message: string,
  data: unknown = null,
  now: Date = new Date(),
): Envelope<unknown> {
  return { data, message, result, ts: now.toISOString() };
}
