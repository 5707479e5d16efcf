import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** A token-endpoint answer as the client got it, to be given again to an identical request. */
export interface GrantAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What the client gets instead of the answer Keycloak gave, when that one is not to be given. */
export interface Replacement {
  status: number;
  error: string;
  description: string;
}

/** Keycloak's token answers are a few KiB; one this long is not one: the connection is cut. */
const MAX_HELD_BYTES = 256 * 1024;
/** Keycloak's refusals are a few hundred bytes; a longer answer is not one to remember. */
const MAX_REMEMBERED_BYTES = 8 * 1024;
/**
 * The headers that say what the body is and how it may be kept, and where a redirect goes (the
 * login form's, password-attempt-throttle.ts); the rest is per answer.
 */
const KEPT_HEADERS = ['content-type', 'cache-control', 'pragma', 'www-authenticate', 'location'];
/** What the client gets when `decide` fails: nothing Keycloak answered leaves unsettled. */
export const UNSETTLED: Replacement = {
  status: 503,
  error: 'temporarily_unavailable',
  description: 'The answer could not be settled; retry later.',
};

/**
 * Holds the whole answer written to `res` (head and body) until it ends, and gives it to
 * `decide` before the client gets any of it: what the failed-login memory keeps of a refusal is
 * stored before the client can repeat the request, and a job credential is recorded before its
 * token leaves. `decide` answers undefined to let the answer go as written, or a replacement to
 * send instead; its failure is a 503 in the same shape. Holders stack: the one set last sees
 * the answer first and passes it on to the one before.
 */
export function holdAnswer(
  res: ServerResponse,
  decide: (answer: GrantAnswer) => Promise<Replacement | undefined | void>,
): void {
  // What writes the answer once it is let go: the methods this holder replaces, restored first,
  // since Node's own `end` writes an implicit head through `res.writeHead`.
  // eslint-disable-next-line @typescript-eslint/unbound-method -- only ever put back on res
  const { writeHead, write, end } = res;
  const release = () => {
    res.writeHead = writeHead;
    res.write = write;
    res.end = end;
  };
  let head: unknown[] | undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  const keep = (chunk: unknown, encoding?: unknown) => {
    if (!isChunk(chunk)) return;
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
        : Buffer.from(chunk);
    chunks.push(bytes);
    size += bytes.length;
    if (size > MAX_HELD_BYTES) res.destroy();
  };
  res.writeHead = (...args: unknown[]) => {
    head = args;
    return res;
  };
  res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    keep(chunk, encoding);
    const done = typeof encoding === 'function' ? encoding : callback;
    if (typeof done === 'function') (done as () => void)();
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, encoding?: unknown) => {
    keep(chunk, encoding);
    const status = typeof head?.[0] === 'number' ? head[0] : res.statusCode;
    const given = head?.find((arg) => typeof arg === 'object' && arg !== null);
    const body = Buffer.concat(chunks);
    const answer = {
      status,
      headers: keptHeaders(given as OutgoingHttpHeaders | string[] | undefined),
      body: body.toString('utf8'),
    };
    void Promise.resolve()
      .then(() => decide(answer))
      .catch(() => UNSETTLED)
      .then((replacement) => {
        if (res.destroyed) return;
        release();
        if (!replacement) {
          if (head) (res.writeHead as (...args: unknown[]) => ServerResponse)(...head);
          res.end(body);
          return;
        }
        res.removeHeader('content-length');
        sendTokenError(res, replacement);
      });
    return res;
  }) as typeof res.end;
}

/** Answers a token-endpoint error in OAuth 2.0's shape (RFC 6749 section 5.2), never cached. */
export function sendTokenError(res: ServerResponse, { status, error, description }: Replacement) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error, error_description: description }));
}

const isChunk = (chunk: unknown): chunk is string | Uint8Array =>
  typeof chunk === 'string' || chunk instanceof Uint8Array;

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
 * account or one with actions pending (its password may be right), not a compressed body, not
 * one longer than a refusal is.
 */
export function isCredentialRefusal(answer: GrantAnswer): boolean {
  if (answer.status !== 400 && answer.status !== 401) return false;
  if (answer.body.length > MAX_REMEMBERED_BYTES) return false;
  try {
    const body = JSON.parse(answer.body) as { error?: unknown; error_description?: unknown };
    const description = typeof body.error_description === 'string' ? body.error_description : '';
    return body.error === 'invalid_grant' && !/disabled|not fully set up/i.test(description);
  } catch {
    return false;
  }
}

/**
 * Whether the answer is Keycloak refusing the request, not a password: an OAuth error other
 * than `invalid_grant` (a malformed request, the client, a DPoP proof it cannot take: `DPoP
 * HTTP URL mismatch` is `invalid_request`). Keycloak answers every wrong password
 * `invalid_grant`, and checks the client, the parameters and the DPoP proof before its grant
 * reads the password, so such a refusal tells nothing of the password and costs no attempt.
 */
export function isRequestRefusal(answer: GrantAnswer): boolean {
  if (answer.status < 400 || answer.status >= 500) return false;
  if (answer.body.length > MAX_REMEMBERED_BYTES) return false;
  try {
    const { error } = JSON.parse(answer.body) as { error?: unknown };
    return typeof error === 'string' && error !== '' && error !== 'invalid_grant';
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
