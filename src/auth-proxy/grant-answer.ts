import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** A token-endpoint answer as the client got it, to be given again to an identical request. */
export interface GrantAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Keycloak's refusals are a few hundred bytes; a longer answer is not one to remember. */
const MAX_BODY_BYTES = 8 * 1024;
/** The headers that say what the body is and how it may be kept; the rest is per answer. */
const KEPT_HEADERS = ['content-type', 'cache-control', 'pragma', 'www-authenticate'];

/**
 * Holds what is written to `res` (status, the headers above, the body) until it ends, and hands
 * it to `beforeSent` before the client gets any of it: what the failed-login memory stores of a
 * refusal is then stored before the client can repeat the request. A body longer than the bound
 * is not one to remember: it is passed on as it comes.
 */
export function holdAnswer(
  res: ServerResponse,
  beforeSent: (answer: GrantAnswer | undefined) => Promise<void>,
): void {
  let held: unknown[][] | undefined = [];
  let size = 0;
  let headers: Record<string, string> = {};
  const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  const flush = () => {
    for (const args of held ?? []) write(...args);
    held = undefined;
  };
  res.writeHead = (...args: unknown[]) => {
    const given = args.find((arg) => typeof arg === 'object' && arg !== null);
    headers = keptHeaders(given as OutgoingHttpHeaders | string[] | undefined);
    return writeHead(...args);
  };
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (!held) return write(chunk, ...rest);
    held.push([chunk, ...rest]);
    size += byteLength(chunk);
    if (size > MAX_BODY_BYTES) flush();
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (!held) return end(chunk, ...rest);
    const body = [
      ...held.map(([written]) => written),
      typeof chunk === 'function' ? undefined : chunk,
    ];
    const answer: GrantAnswer | undefined =
      size + byteLength(body.at(-1)) > MAX_BODY_BYTES
        ? undefined
        : {
            status: res.statusCode,
            headers,
            body: Buffer.concat(body.filter(isChunk).map(toBuffer)).toString('utf8'),
          };
    void beforeSent(answer).finally(() => {
      flush();
      end(chunk, ...rest);
    });
    return res;
  }) as typeof res.end;
}

const isChunk = (chunk: unknown) => typeof chunk === 'string' || chunk instanceof Uint8Array;
const toBuffer = (chunk: unknown) =>
  typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array);
const byteLength = (chunk: unknown) => (isChunk(chunk) ? toBuffer(chunk).length : 0);

function keptHeaders(given: OutgoingHttpHeaders | string[] | undefined): Record<string, string> {
  const pairs: [string, unknown][] = Array.isArray(given)
    ? given.flatMap((name, i) => (i % 2 === 0 ? [[name, given[i + 1]] as [string, unknown]] : []))
    : Object.entries(given ?? {});
  const kept: Record<string, string> = {};
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    if (KEPT_HEADERS.includes(lower) && typeof value === 'string') kept[lower] = value;
  }
  return kept;
}

/**
 * Whether the answer is Keycloak refusing the credentials themselves (`invalid_grant` for a
 * wrong password or one-time password), which the same request would get again: not a disabled
 * account or one with actions pending (its password may be right), not a compressed body.
 */
export function isCredentialRefusal(answer: GrantAnswer): boolean {
  if (answer.status !== 400 && answer.status !== 401) return false;
  try {
    const body = JSON.parse(answer.body) as { error?: unknown; error_description?: unknown };
    const description = typeof body.error_description === 'string' ? body.error_description : '';
    return body.error === 'invalid_grant' && !/disabled|not fully set up/i.test(description);
  } catch {
    return false;
  }
}

/** The answer as the memory stores it, and back; anything else read back is no answer. */
export const grantAnswerText = (answer: GrantAnswer) => JSON.stringify(answer);

export function grantAnswerOf(text: string | undefined): GrantAnswer | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<GrantAnswer>;
    return typeof value.status === 'number' &&
      typeof value.body === 'string' &&
      typeof value.headers === 'object' &&
      value.headers !== null
      ? (value as GrantAnswer)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Gives a remembered answer again. */
export function replayAnswer(res: ServerResponse, answer: GrantAnswer): void {
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}
