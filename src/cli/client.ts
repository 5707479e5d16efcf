import { SUCCESS_RESULT } from '../envelope/envelope.ts';
import { sendWithProof, type DpopKey } from './dpop.ts';
import { CliError, envelopeError } from './errors.ts';

/** One call of the gateway's platform API; `path` is relative to the base URL. */
export interface ApiRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: Record<string, unknown>;
}

/** Where and as whom the CLI calls the gateway. */
export interface Connection {
  /** Always ends with `/`, so API paths resolve below any path prefix it has. */
  baseUrl: URL;
  /** The `Authorization` header value; never printed. */
  authorization: string;
  /**
   * The key of a bound token (`Authorization: DPoP <token>`): each request carries a fresh
   * proof of it, with the token's hash (`ath`), naming the request's path under `gateway`, the
   * gateway's own address (its `PUBLIC_URL`, which it compares `htu` with), whatever address
   * `baseUrl` is.
   */
  dpop?: { key: DpopKey; accessToken: string; gateway: URL };
}

export const DEFAULT_URL = 'http://localhost:8000';
export const DEFAULT_TIMEOUT_MS = 30_000;
/**
 * The most the CLI reads of one answer: a page of the largest listing (1000 entries) is a few
 * MiB at most. A server that sends more (hostile, or broken) is not held in memory.
 * Exports stream to their file instead.
 */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/**
 * The deepest nesting of arrays and objects the CLI takes in an answer: the gateway's are a few
 * levels deep. Printing one nested thousands of levels (a few hundred KiB that JSON.parse
 * takes) would overflow the stack.
 */
export const MAX_ANSWER_NESTING = 64;

// RFC 6750 b64token: anything else could not travel in a header, or was pasted with junk.
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * Whether `token` has a token's form (RFC 6750 b64token), as one the CLI is given or gets from
 * a token endpoint must: it goes in a header, and `realmgate token` prints it to a terminal.
 */
export const isTokenForm = (token: string): boolean => BEARER_TOKEN.test(token);

/**
 * Reads `REALMGATE_URL` and the credentials: `REALMGATE_TOKEN` (Bearer), or
 * `REALMGATE_USERNAME` with `REALMGATE_PASSWORD` (Basic). Both kinds at once is refused rather
 * than silently picking one, as they may name different users.
 */
export function readConnection(env: Record<string, string | undefined>): Connection {
  return { baseUrl: readBaseUrl(env.REALMGATE_URL), authorization: readAuthorization(env) };
}

/** `REALMGATE_URL` (or the default) as a base URL ending with `/`; a config error otherwise. */
export function readBaseUrl(value: string | undefined): URL {
  let url: URL;
  try {
    url = new URL(value?.trim() || DEFAULT_URL);
  } catch {
    throw new CliError('config', 'REALMGATE_URL is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError('config', 'REALMGATE_URL must start with http:// or https://');
  }
  if (url.username || url.password) {
    throw new CliError('config', 'REALMGATE_URL must not hold credentials; use REALMGATE_USERNAME');
  }
  if (url.search || url.hash) {
    throw new CliError('config', 'REALMGATE_URL must not have a query or fragment');
  }
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

function readAuthorization(env: Record<string, string | undefined>): string {
  const authorization = readEnvAuthorization(env);
  if (authorization === undefined) {
    throw new CliError(
      'config',
      'no credentials: set REALMGATE_TOKEN, or REALMGATE_USERNAME and REALMGATE_PASSWORD, ' +
        'of a master-realm user',
    );
  }
  return authorization;
}

/**
 * The `Authorization` header from `REALMGATE_TOKEN`, or `REALMGATE_USERNAME` with
 * `REALMGATE_PASSWORD`; undefined when none of the three is set (a stored login may serve).
 */
export function readEnvAuthorization(env: Record<string, string | undefined>): string | undefined {
  const token = env.REALMGATE_TOKEN?.trim();
  const username = env.REALMGATE_USERNAME;
  const password = env.REALMGATE_PASSWORD;
  if (token && (username || password)) {
    throw new CliError(
      'config',
      'set either REALMGATE_TOKEN or REALMGATE_USERNAME and REALMGATE_PASSWORD, not both',
    );
  }
  if (token) {
    if (!isTokenForm(token)) throw new CliError('config', 'REALMGATE_TOKEN is malformed');
    return `Bearer ${token}`;
  }
  if (!username && !password) return undefined;
  if (!username) throw new CliError('config', 'REALMGATE_USERNAME is not set');
  if (!password) throw new CliError('config', 'REALMGATE_PASSWORD is not set');
  // Basic splits user and password at the first colon, so such a name cannot be sent.
  if (username.includes(':')) throw new CliError('config', 'REALMGATE_USERNAME contains ":"');
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/**
 * Sends one request and returns the envelope's `data`. Throws `CliError` `api` for any answer
 * that is not a success envelope, and `unreachable` when no answer came (refused, DNS, TLS,
 * timeout).
 */
export async function callApi(
  request: ApiRequest,
  connection: Connection,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<unknown> {
  const { status, text } = await send(request, connection, timeoutMs, false);
  return readEnvelopeData(status, text, connection.baseUrl);
}

/** A file the gateway started to send: its body, unread, and its media type. */
export interface Download {
  status: number;
  /** Lower case, without parameters (`text/csv`); null when the answer names none. */
  mediaType: string | null;
  body: ReadableStream<Uint8Array>;
}

/**
 * Sends one request whose success is not an envelope but a file (an export): its body, read as
 * the caller takes it. `timeoutMs` bounds the wait for the answer to start and each silence of
 * the download (the body then fails with a `TimeoutError`), not how long the download takes.
 * Errors as `callApi`'s: a refusal is an envelope.
 */
export async function openDownload(
  request: ApiRequest,
  connection: Connection,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<Download> {
  const { status, text, body, contentType } = await send(request, connection, timeoutMs, true);
  if (body !== null) {
    const mediaType = contentType?.split(';')[0]!.trim().toLowerCase() || null;
    return { status, mediaType, body };
  }
  readEnvelopeData(status, text, connection.baseUrl);
  throw new CliError('api', `error ${status}: the gateway sent no file`, undefined, status);
}

/**
 * One request, with a DPoP proof when the connection has a key. `stream`: a 2xx answer's body
 * is handed back unread (`body`), else every answer is read into `text`.
 */
async function send(
  request: ApiRequest,
  connection: Connection,
  timeoutMs: number,
  stream: boolean,
): Promise<{
  status: number;
  text: string;
  body: ReadableStream<Uint8Array> | null;
  contentType: string | null;
}> {
  const relative = request.path.replace(/^\//, '');
  const url = new URL(relative, connection.baseUrl);
  const headers: Record<string, string> = {
    accept: 'application/json',
    authorization: connection.authorization,
  };
  if (request.body) headers['content-type'] = 'application/json';
  // Until the answer has come: a download then takes as long as it takes.
  const abort = new AbortController();
  const timer = setTimeout(
    () => abort.abort(new DOMException('no answer', 'TimeoutError')),
    timeoutMs,
  );
  let answer: {
    status: number;
    text: string;
    body: ReadableStream<Uint8Array> | null;
    location: string | null;
    contentType: string | null;
  };
  try {
    const { dpop } = connection;
    const proofUrl = dpop && new URL(relative, dpop.gateway);
    const target = { method: request.method, url: proofUrl ?? url, accessToken: dpop?.accessToken };
    answer = await sendWithProof(dpop?.key, target, async (proof) => {
      // A redirect is reported, not followed: a POST would be replayed as GET, or the
      // credentials sent somewhere the user did not name.
      const response = await fetch(url, {
        method: request.method,
        headers: proof === undefined ? headers : { ...headers, dpop: proof },
        body: request.body && JSON.stringify(request.body),
        redirect: 'manual',
        signal: abort.signal,
      });
      const { headers: answered, status } = response;
      const location = answered.get('location');
      const contentType = answered.get('content-type');
      if (stream && status >= 200 && status < 300) {
        const body = response.body && watchSilence(response.body, abort, timeoutMs);
        return { status, headers: answered, text: '', body, location, contentType };
      }
      const text = await readAnswerText(response, connection.baseUrl);
      return { status, headers: answered, text, body: null, location, contentType };
    });
  } catch (error) {
    throw describeUnreachable(error, connection.baseUrl, timeoutMs);
  } finally {
    clearTimeout(timer);
  }
  const { status, location } = answer;
  if (status >= 300 && status < 400) {
    const target = location ? ` to ${printable(location)}` : '';
    throw new CliError('api', `error ${status}: the gateway redirects${target}; fix REALMGATE_URL`);
  }
  return answer;
}

/**
 * `body` as it comes, the request aborted (`TimeoutError`) when no byte came for `timeoutMs`:
 * a server that stops sending midway would otherwise hold the download open forever.
 */
function watchSilence(
  body: ReadableStream<Uint8Array>,
  abort: AbortController,
  timeoutMs: number,
): ReadableStream<Uint8Array> {
  const silent = () =>
    abort.abort(new DOMException(`no data for ${timeoutMs / 1000} s`, 'TimeoutError'));
  let timer: NodeJS.Timeout | undefined;
  // Unreferenced: a download cancelled or cut leaves no timer that keeps the process up.
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(silent, timeoutMs).unref();
  };
  arm();
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        arm();
        controller.enqueue(chunk);
      },
      flush: () => clearTimeout(timer),
    }),
  );
}

function readEnvelopeData(status: number, text: string, baseUrl: URL): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (isNestedDeeperThan(body, MAX_ANSWER_NESTING)) {
    throw new CliError(
      'api',
      `error ${status}: the answer of ${baseUrl.href} is nested deeper than ` +
        `${MAX_ANSWER_NESTING} levels; not read`,
      undefined,
      status,
    );
  }
  if (!isEnvelope(body)) {
    throw new CliError(
      'api',
      `error ${status}: the answer of ${baseUrl.href} is not an envelope`,
      undefined,
      status,
    );
  }
  if (status >= 200 && status < 300 && body.result === SUCCESS_RESULT) return body.data;
  throw envelopeError(status, printable(body.result), printable(body.message));
}

/** Whether `value` nests arrays and objects more than `levels` deep; walked without recursion. */
function isNestedDeeperThan(value: unknown, levels: number): boolean {
  const pending: Array<{ item: unknown; level: number }> = [{ item: value, level: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { item, level } = next;
    if (typeof item !== 'object' || item === null) continue;
    if (level > levels) return true;
    for (const child of Object.values(item)) pending.push({ item: child, level: level + 1 });
  }
  return false;
}

function isEnvelope(
  body: unknown,
): body is { data: unknown; message: string; result: string; ts: string } {
  if (typeof body !== 'object' || body === null || !('data' in body)) return false;
  const { message, result } = body as { message?: unknown; result?: unknown };
  return typeof message === 'string' && typeof result === 'string';
}

/**
 * The body of an answer of `from` as text, up to `MAX_ANSWER_BYTES`: past that the answer is
 * dropped and the command ends (exit 1), as for any other answer it cannot use.
 */
export async function readAnswerText(response: Response, from: URL | string): Promise<string> {
  if (response.body === null) return '';
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    bytes += value.byteLength;
    if (bytes > MAX_ANSWER_BYTES) {
      await reader.cancel().catch(() => {});
      const { status } = response;
      const limit = `${MAX_ANSWER_BYTES / 1024 / 1024} MiB`;
      const where = typeof from === 'string' ? from : from.href;
      throw new CliError(
        'api',
        `error ${status}: the answer of ${where} is larger than ${limit}; not read`,
        undefined,
        status,
      );
    }
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * What the CLI says when `fetch` got no answer from the gateway; an answer the CLI refused to
 * read (too large) is said as it is.
 */
export function describeUnreachable(error: unknown, baseUrl: URL, timeoutMs: number): CliError {
  if (error instanceof CliError) return error;
  const name = (error as { name?: unknown }).name;
  if (name === 'TimeoutError') {
    const seconds = timeoutMs / 1000;
    return new CliError(
      'unreachable',
      `no answer from the gateway at ${baseUrl.href} within ${seconds} s`,
    );
  }
  // fetch says only "fetch failed"; the socket error code in `cause` is what helps.
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const reason = [cause?.code, cause?.message, (error as Error).message].find(
    (text) => typeof text === 'string',
  );
  return new CliError(
    'unreachable',
    `cannot reach the gateway at ${baseUrl.href} (${printable(reason ?? 'unknown error')}); ` +
      'is it running? REALMGATE_URL selects another address',
  );
}

/** Keeps control characters of a server's text away from the user's terminal. */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}
