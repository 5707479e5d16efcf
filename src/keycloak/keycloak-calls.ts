import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { failureOf, toKeycloakError, unexpectedAnswer } from './keycloak-failures.ts';

/** Which of the gateway's own Keycloak calls this was. */
export type KeycloakCallKind = 'grant' | 'introspection' | 'jwks' | 'admin';

/**
 * How it ended: `ok` (a 2xx answer the gateway could use), `refused` (a 4xx answer that is a
 * normal answer, e.g. `invalid_grant`, or 409 "exists" from the admin API), or the failure it
 * was translated into (503 unreachable, 504 timeout, 502 bad answer).
 */
export type KeycloakCallOutcome = 'ok' | 'refused' | 'unreachable' | 'timeout' | 'bad_answer';

/** Told about every call once it has ended, e.g. to count calls and their durations. */
export interface KeycloakCallObserver {
  onCall?(kind: KeycloakCallKind, outcome: KeycloakCallOutcome, seconds: number): void;
}

/**
 * Reads a Keycloak answer: returns what the caller needs, or throws (`unexpectedAnswer`) when
 * the answer is unusable. A 4xx answer read without throwing counts as `refused`.
 */
export type ReadAnswer<T> = (status: number, body: string) => T;

/** The one client layer for the gateway's own calls to Keycloak (not the /auth proxy). */
export interface KeycloakCalls {
  /** Keycloak's base URL including its relative path, e.g. `http://127.0.0.1:8080/auth`. */
  readonly keycloakUrl: string;
  readonly timeoutMs: number;
  /**
   * One HTTP exchange: `GET` without `form`, else a form `POST` to `path` (below keycloakUrl).
   * Rejects with the translated AppError (503/504/502) when Keycloak cannot be used.
   */
  exchange<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
  ): Promise<T>;
  /**
   * One admin-API request made by `@keycloak/keycloak-admin-client` (see admin-client.ts):
   * its 4xx errors pass through for the caller to interpret, every other failure is translated.
   */
  admin<T>(work: () => Promise<T>): Promise<T>;
}

/** Keycloak's answers are a few KiB; a far larger one is not the answer we asked for. */
const MAX_ANSWER_BYTES: Record<KeycloakCallKind, number> = {
  grant: 1024 * 1024,
  introspection: 64 * 1024,
  jwks: 1024 * 1024,
  admin: Infinity,
};

/**
 * Connections kept to Keycloak. Background re-checks use at most 8 at once; with
 * `REVOCATION_CHECK_SECONDS=0` every request introspects and the rest wait for a socket.
 */
const MAX_SOCKETS = 32;

/**
 * Creates the layer over plain `node:http` with a keep-alive pool: measured against the real
 * Keycloak it costs the gateway less CPU per call than fetch (see the README's performance notes).
 * Timeouts: a connection or answer idle for `timeoutMs` is a timeout (504).
 */
export function createKeycloakCalls(options: {
  keycloakUrl: string;
  timeoutMs: number;
  observer?: KeycloakCallObserver;
}): KeycloakCalls {
  const { keycloakUrl, timeoutMs } = options;
  const base = new URL(keycloakUrl);
  const secure = base.protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: MAX_SOCKETS };
  const agent = secure ? new HttpsAgent(agentOptions) : new Agent(agentOptions);
  const request = secure ? httpsRequest : httpRequest;
  const hostname = base.hostname.replace(/^\[|\]$/g, '');
  const port = base.port || (secure ? 443 : 80);
  const basePath = base.pathname.replace(/\/$/, '');
  const observer = options.observer;
  const observed = observer?.onCall !== undefined;
  const report = (kind: KeycloakCallKind, outcome: KeycloakCallOutcome, started: number) => {
    if (observed) observer?.onCall?.(kind, outcome, (performance.now() - started) / 1000);
  };

  function exchange<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
  ): Promise<T> {
    const started = observed ? performance.now() : 0;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        const error = toKeycloakError(err);
        report(kind, failureOf(error), started);
        reject(error);
      };
      const send = (retried: boolean) => {
        const req = request({
          hostname,
          port,
          path: basePath + path,
          method: form === undefined ? 'GET' : 'POST',
          agent,
          timeout: timeoutMs,
          headers:
            form === undefined
              ? { accept: 'application/json' }
              : {
                  accept: 'application/json',
                  'content-type': 'application/x-www-form-urlencoded',
                  'content-length': Buffer.byteLength(form),
                },
        });
        let answered = false;
        let cutOff: Error | undefined;
        req.on('timeout', () => {
          cutOff = timeoutError(timeoutMs);
          req.destroy(cutOff);
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          // A kept-alive connection the server closed just as we reused it: the request never
          // reached Keycloak, so once more on a fresh connection.
          const stale = err.code === 'ECONNRESET' || err.code === 'EPIPE';
          if (stale && !answered && !retried && req.reusedSocket) send(true);
          else fail(err);
        });
        req.on('response', (res) => {
          answered = true;
          readBody(res, MAX_ANSWER_BYTES[kind], (err, body) => {
            if (err) {
              req.destroy();
              fail(cutOff ?? err);
              return;
            }
            if (settled) return;
            const status = res.statusCode ?? 0;
            let value: T;
            try {
              value = read(status, body);
            } catch (readErr) {
              fail(readErr);
              return;
            }
            settled = true;
            report(kind, status < 400 ? 'ok' : 'refused', started);
            resolve(value);
          });
        });
        req.end(form);
      };
      send(false);
    });
  }

  async function admin<T>(work: () => Promise<T>): Promise<T> {
    const started = observed ? performance.now() : 0;
    let result: T;
    try {
      result = await work();
    } catch (err) {
      const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
      if (typeof status === 'number' && status >= 400 && status < 500) {
        report('admin', 'refused', started);
        throw err;
      }
      const error = toKeycloakError(err);
      report('admin', failureOf(error), started);
      throw error;
    }
    // The admin API answers JSON or nothing; the client hands back any other body as a string.
    if (typeof result === 'string' && result !== '') {
      report('admin', 'bad_answer', started);
      throw unexpectedAnswer('admin API', 200, 'not JSON');
    }
    report('admin', 'ok', started);
    return result;
  }

  return { keycloakUrl, timeoutMs, exchange, admin };
}

function timeoutError(timeoutMs: number): Error {
  return Object.assign(new Error(`Keycloak did not answer within ${timeoutMs} ms`), {
    code: 'ETIMEDOUT',
  });
}

/** The answer's body as text, refused (502) past `maxBytes`. */
function readBody(
  res: IncomingMessage,
  maxBytes: number,
  done: (err: Error | undefined, body: string) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) res.destroy(unexpectedAnswer('answer', res.statusCode ?? 0, 'too large'));
    else chunks.push(chunk);
  });
  res.on('error', (err) => done(err, ''));
  res.on('end', () =>
    done(
      undefined,
      chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'),
    ),
  );
}
