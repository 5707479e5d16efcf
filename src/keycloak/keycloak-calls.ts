import {
  failedBeforeSending,
  failureOf,
  refusedAnswer,
  toKeycloakError,
  translatedCause,
  unexpectedAnswer,
  type KeycloakFailure,
} from './keycloak-failures.ts';
import {
  createNodeExchange,
  foundNoPlace,
  timeoutError,
  type ExchangeLimits,
  type NodeExchange,
} from './keycloak-http.ts';
import { createKeycloakNodes, type KeycloakNode, type KeycloakNodes } from './keycloak-nodes.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';

/** Which of the gateway's own Keycloak calls this was: the `kind` label of its metrics. */
export const KEYCLOAK_CALL_KINDS = ['grant', 'introspection', 'jwks', 'admin'] as const;
export type KeycloakCallKind = (typeof KEYCLOAK_CALL_KINDS)[number];

/**
 * How it ended: `ok` (a 2xx answer the gateway could use), `refused` (a 4xx answer that is a
 * normal answer, e.g. `invalid_grant`, or 409 "exists" from the admin API), the failure it was
 * translated into (503 unreachable, 504 timeout, 502 bad answer), or `no_place`: it waited its
 * whole limit for a connection the gateway's other calls to the node held, and was never sent
 * (504, but no sign of a slow Keycloak). The `outcome` label.
 */
export const KEYCLOAK_CALL_OUTCOMES = [
  'ok',
  'refused',
  'unreachable',
  'timeout',
  'bad_answer',
  'no_place',
] as const;
export type KeycloakCallOutcome = (typeof KEYCLOAK_CALL_OUTCOMES)[number];

/** The outcome of a call that failed with `err` (a translated failure, or what wraps one). */
function outcomeOf(err: unknown): KeycloakCallOutcome {
  return foundNoPlace(err) ? 'no_place' : failureOf(err);
}

/** Told about every call once it has ended, e.g. to count calls and their durations. */
export interface KeycloakCallObserver {
  onCall?(kind: KeycloakCallKind, outcome: KeycloakCallOutcome, seconds: number): void;
}

/**
 * Reads a Keycloak answer: returns what the caller needs, or throws (`unexpectedAnswer`) when
 * the answer is unusable. A 4xx answer read without throwing counts as `refused`.
 */
export type ReadAnswer<T> = (status: number, body: string, contentType?: string) => T;

/** The one client layer for the gateway's own calls to Keycloak (not the /auth proxy). */
export interface KeycloakCalls {
  /**
   * The first node's base URL including its relative path, e.g. `http://127.0.0.1:8080/auth`;
   * each call picks its node from `nodes`.
   */
  readonly keycloakUrl: string;
  /** The nodes of `KEYCLOAK_URL` and their states. */
  readonly nodes: KeycloakNodes;
  /** `KEYCLOAK_TIMEOUT_MS`: the bound of every call but a grant, and when a node is probed. */
  readonly timeoutMs: number;
  /**
   * One HTTP exchange: `GET` without `form`, else a form `POST` to `path` (below a node's base
   * URL). Rejects with the translated AppError (503/504/502) when Keycloak cannot be used.
   * With several nodes, a failed key-set fetch or introspection is tried once more on another
   * node that is up; a grant only when its request was never sent (see `mayRetry`).
   */
  exchange<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
  ): Promise<T>;
  /**
   * One call made by a library that sends its requests with `send` (openid-client, see
   * oidc-clients.ts): the call ends when `work` does, and that end is observed and traced once.
   * `work` resolving is `ok`, or `refused` when `refused(value)` says so. An error it ends with
   * is the failure `send` translated (the library wraps it: `translatedCause`), or else the
   * library refused what Keycloak answered: a bad answer, 502 (`refusedAnswer`).
   */
  call<T>(
    kind: KeycloakCallKind,
    work: () => Promise<T>,
    refused?: (value: T) => boolean,
  ): Promise<T>;
  /**
   * The HTTP exchange of `exchange` (node choice, retries, failure translation) without an
   * outcome of its own: the requests of a `call`'s work, with the `headers` the library adds
   * (a grant's `DPoP` proof).
   */
  send<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
    headers?: Readonly<Record<string, string>>,
  ): Promise<T>;
  /**
   * One admin-API request made by `@keycloak/keycloak-admin-client` against the node whose base
   * URL `work` is given (see admin-client.ts): its 4xx errors pass through for the caller to
   * interpret, every other failure is translated. With several nodes, a request that could not
   * connect is tried once more on another node that is up, and so is a `read` that timed out.
   */
  admin<T>(work: (nodeUrl: string) => Promise<T>, read?: boolean): Promise<T>;
}

/** Keycloak's answers are a few KiB; a far larger one is not the answer we asked for. */
const MAX_ANSWER_BYTES: Record<KeycloakCallKind, number> = {
  grant: 1024 * 1024,
  introspection: 64 * 1024,
  jwks: 1024 * 1024,
  admin: Infinity,
};

/**
 * Calls that change nothing in Keycloak, retried on another node after any connect error or
 * timeout. A grant creates a session: retried only when its request was never sent.
 */
const SAFE_KINDS: Record<KeycloakCallKind, boolean> = {
  grant: false,
  introspection: true,
  jwks: true,
  admin: false,
};

/** Where the calls go: `KEYCLOAK_URL`'s one or several URLs, or nodes shared with the gateway. */
export type KeycloakCallsTarget =
  | { keycloakUrl: string | readonly string[]; nodes?: undefined }
  | { nodes: KeycloakNodes; keycloakUrl?: undefined };

/**
 * Creates the layer: one keep-alive pool per node (see keycloak-http.ts). Timeouts: a
 * connection or answer idle for `timeoutMs` is a timeout (504), for a grant `grantTimeoutMs`.
 * A call kept waiting `timeoutMs` has its node probed (`nodes.slow`): a busy node answers its
 * probe and stays up, and a grant goes on waiting; a hung one does not, goes down, and the
 * grant is cut off then (504), so an outage is noticed as soon as with any other call.
 */
export function createKeycloakCalls(
  options: KeycloakCallsTarget & {
    timeoutMs: number;
    /**
     * A password grant's bound (`AUTH_PROXY_TIMEOUT_MS`, as the same grant through `/auth`):
     * Keycloak hashes the password, and a burst of logins queues behind the hashing.
     */
    grantTimeoutMs?: number;
    observer?: KeycloakCallObserver;
    /** When set, each call is a client span `keycloak <kind>`, retries included. */
    tracing?: Tracing;
  },
): KeycloakCalls {
  const { timeoutMs } = options;
  const grantTimeoutMs = Math.max(options.grantTimeoutMs ?? timeoutMs, timeoutMs);
  const nodes =
    options.nodes ??
    createKeycloakNodes({
      urls: typeof options.keycloakUrl === 'string' ? [options.keycloakUrl] : options.keycloakUrl,
      timeoutMs,
    });
  const exchanges: NodeExchange[] = nodes.all.map((node) => createNodeExchange(node.url));
  const several = nodes.all.length > 1;
  const observer = options.observer;
  const observed = observer?.onCall !== undefined;
  const report = (kind: KeycloakCallKind, outcome: KeycloakCallOutcome, started: number) => {
    if (observed) observer?.onCall?.(kind, outcome, (performance.now() - started) / 1000);
  };

  /**
   * After `failure` on `node`: takes the node out if it could not be reached, has it probed if
   * it was too slow (see `createKeycloakCalls`), and names a retry.
   */
  function afterFailure(
    node: KeycloakNode,
    kind: KeycloakCallKind,
    failure: KeycloakFailure,
    err: unknown,
    safe: boolean,
  ): KeycloakNode | undefined {
    if (failure === 'bad_answer') return undefined;
    nodes.callFailed(node, failure, `${kind} call`);
    return several && (safe || failedBeforeSending(err)) ? nodes.other(node) : undefined;
  }

  /** `exchange`; `observe` false: no outcome reported (a `call` reports its own). */
  function send<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
    headers?: Readonly<Record<string, string>>,
    observe = false,
  ): Promise<T> {
    const started = performance.now();
    const limitMs = kind === 'grant' ? grantTimeoutMs : timeoutMs;
    const limits: ExchangeLimits = {
      maxBytes: MAX_ANSWER_BYTES[kind],
      timeoutMs: limitMs,
      // A grant takes one of the places kept for grants, within its realm's share.
      ...(kind === 'grant' && { grantOf: /^\/realms\/([^/]+)\//.exec(path)?.[1] ?? '' }),
    };
    return new Promise<T>((resolve, reject) => {
      const attempt = (node: KeycloakNode, retry: boolean) => {
        // A grant's limit bounds the login, as through `/auth`: its retry has what is left.
        const bounds =
          retry || kind !== 'grant'
            ? limits
            : { ...limits, timeoutMs: Math.ceil(limitMs - (performance.now() - started)) };
        // Only a grant may wait past `timeoutMs`: then only while its node answers its probe.
        let watch: NodeJS.Timeout | undefined;
        let ended = false;
        const cutOff = exchanges[node.index]!(
          path,
          form,
          bounds,
          read,
          (err, value, status) => {
            ended = true;
            clearTimeout(watch);
            if (err === undefined) {
              nodes.answered(node);
              if (observe) report(kind, status < 400 ? 'ok' : 'refused', started);
              resolve(value!);
              return;
            }
            const error = toKeycloakError(err);
            // No place: its node not to blame, and its whole limit spent waiting.
            const next = foundNoPlace(err)
              ? undefined
              : afterFailure(node, kind, failureOf(error), err, SAFE_KINDS[kind]);
            if (retry && next && (kind !== 'grant' || performance.now() - started < limitMs)) {
              attempt(next, false);
              return;
            }
            if (observe) report(kind, outcomeOf(err), started);
            reject(error);
          },
          headers,
        );
        if (bounds.timeoutMs > timeoutMs && !ended) {
          watch = setTimeout(() => {
            void nodes.slow(node, `${kind} call: no answer in ${timeoutMs} ms`).then((state) => {
              if (state === 'down')
                cutOff((beforeConnect) => timeoutError(timeoutMs, beforeConnect));
            });
          }, timeoutMs);
        }
      };
      attempt(nodes.pick(), true);
    });
  }

  function exchange<T>(
    kind: KeycloakCallKind,
    path: string,
    form: string | undefined,
    read: ReadAnswer<T>,
  ): Promise<T> {
    return send(kind, path, form, read, undefined, true);
  }

  async function call<T>(
    kind: KeycloakCallKind,
    work: () => Promise<T>,
    refused?: (value: T) => boolean,
  ): Promise<T> {
    const started = observed ? performance.now() : 0;
    let value: T;
    try {
      value = await work();
    } catch (err) {
      const error = translatedCause(err) ?? refusedAnswer(err);
      report(kind, outcomeOf(error), started);
      throw error;
    }
    report(kind, refused?.(value) ? 'refused' : 'ok', started);
    return value;
  }

  async function admin<T>(work: (nodeUrl: string) => Promise<T>, read = false): Promise<T> {
    const started = observed ? performance.now() : 0;
    let node = nodes.pick();
    let result: T;
    for (let retry = true; ; retry = false) {
      try {
        result = await work(node.url);
        break;
      } catch (err) {
        const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
        if (typeof status === 'number' && status >= 400 && status < 500) {
          nodes.answered(node);
          report('admin', 'refused', started);
          throw err;
        }
        const error = toKeycloakError(err);
        const failure = failureOf(error);
        const next = afterFailure(node, 'admin', failure, err, read);
        if (!retry || !next) {
          report('admin', failure, started);
          throw error;
        }
        node = next;
      }
    }
    nodes.answered(node);
    // The admin API answers JSON or nothing; the client hands back any other body as a string.
    if (typeof result === 'string' && result !== '') {
      report('admin', 'bad_answer', started);
      throw unexpectedAnswer('admin API', 200, 'not JSON');
    }
    report('admin', 'ok', started);
    return result;
  }

  const tracing = options.tracing;
  if (!tracing) {
    return { keycloakUrl: nodes.all[0]!.url, nodes, timeoutMs, exchange, call, send, admin };
  }
  /** `work` inside a span of its own; the node exchange and the admin client name it. */
  const traced = <T>(kind: KeycloakCallKind, work: () => Promise<T>): Promise<T> => {
    const span = tracing.start(`keycloak ${kind}`, 'client', { 'realmgate.keycloak.kind': kind });
    return tracing.within(span, work).then(
      (value) => {
        endSpan(span);
        return value;
      },
      (err: unknown) => {
        endSpan(span, err);
        throw err;
      },
    );
  };
  return {
    keycloakUrl: nodes.all[0]!.url,
    nodes,
    timeoutMs,
    exchange: (kind, path, form, read) => traced(kind, () => exchange(kind, path, form, read)),
    call: (kind, work, refused) => traced(kind, () => call(kind, work, refused)),
    send,
    admin: (work, read) => traced('admin', () => admin(work, read)),
  };
}
