import { AppError, type ErrorCode } from '../envelope/errors.ts';

/** Why one of the gateway's own calls to Keycloak failed. */
export type KeycloakFailure = 'unreachable' | 'timeout' | 'bad_answer';

/**
 * The one translation of a failed Keycloak call into what the client sees (README, result
 * codes): unreachable 503 `503-11001` (the error handler adds Retry-After), too slow 504
 * `504-11001`, a bad answer 502 `502-11001`.
 */
const CODE_OF: Record<KeycloakFailure, ErrorCode> = {
  unreachable: 'identityProviderUnavailable',
  timeout: 'identityProviderTimeout',
  bad_answer: 'identityProviderBadGateway',
};

/**
 * The network errors a Keycloak call can end with, each once: what it means for the client
 * (unreachable, too slow, or an answer refused at the socket), and whether it struck while the
 * connection was being made, so that no byte of the request reached Keycloak and it may go to
 * another node whatever it was.
 */
const NETWORK_ERRORS: Readonly<
  Record<string, { failure: KeycloakFailure; beforeSending: boolean }>
> = {
  // Socket and DNS errors: the request did not reach Keycloak, or its connection broke.
  ECONNREFUSED: { failure: 'unreachable', beforeSending: true },
  ENOTFOUND: { failure: 'unreachable', beforeSending: true },
  EAI_AGAIN: { failure: 'unreachable', beforeSending: true },
  EHOSTUNREACH: { failure: 'unreachable', beforeSending: true },
  EHOSTDOWN: { failure: 'unreachable', beforeSending: true },
  ENETUNREACH: { failure: 'unreachable', beforeSending: true },
  ENETDOWN: { failure: 'unreachable', beforeSending: true },
  EADDRNOTAVAIL: { failure: 'unreachable', beforeSending: true },
  ECONNRESET: { failure: 'unreachable', beforeSending: false },
  EPIPE: { failure: 'unreachable', beforeSending: false },
  // fetch (undici): the other side closed the connection before answering.
  UND_ERR_SOCKET: { failure: 'unreachable', beforeSending: false },
  UND_ERR_CLOSED: { failure: 'unreachable', beforeSending: false },
  // Timeouts, ours (AbortSignal.timeout, a socket timeout) or the client library's.
  UND_ERR_CONNECT_TIMEOUT: { failure: 'timeout', beforeSending: true },
  ETIMEDOUT: { failure: 'timeout', beforeSending: false },
  ESOCKETTIMEDOUT: { failure: 'timeout', beforeSending: false },
  UND_ERR_HEADERS_TIMEOUT: { failure: 'timeout', beforeSending: false },
  UND_ERR_BODY_TIMEOUT: { failure: 'timeout', beforeSending: false },
  ERR_JWKS_TIMEOUT: { failure: 'timeout', beforeSending: false },
  // The proxy's exchange (outbound/forward.ts): Keycloak answered, with a 100 or 101 unasked.
  UPSTREAM_UNASKED_INTERIM: { failure: 'bad_answer', beforeSending: false },
};

/** The error itself, then its `cause` chain (fetch wraps socket errors), an AggregateError's
 * first error (connection attempts to several addresses), five deep at most. */
function* errorChain(err: unknown): Generator<object> {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    yield current;
    current =
      current instanceof AggregateError && current.errors.length > 0
        ? current.errors[0]
        : (current as { cause?: unknown }).cause;
  }
}

function networkErrorOf(error: object) {
  const { code } = error as { code?: unknown };
  return typeof code === 'string' && Object.hasOwn(NETWORK_ERRORS, code)
    ? NETWORK_ERRORS[code]
    : undefined;
}

/**
 * What a Keycloak answer with an unexpected HTTP status means: 502 and 503 come from Keycloak
 * starting or stopping, or from a proxy in front of it that cannot reach it (retry later); 504
 * from such a proxy giving up; any other unexpected status is a bad answer.
 */
export function failureOfStatus(status: number): KeycloakFailure {
  if (status === 502 || status === 503) return 'unreachable';
  if (status === 504) return 'timeout';
  return 'bad_answer';
}

/**
 * Classifies any error a Keycloak call ended with, looking through `cause` chains (fetch wraps
 * socket errors in `TypeError: fetch failed`) and AggregateErrors (connection attempts to
 * several addresses). What is not recognisably a network or timeout failure (nor a fetch
 * "network error") is a bad answer.
 */
export function failureOf(err: unknown): KeycloakFailure {
  for (const current of errorChain(err)) {
    if (current instanceof AppError) {
      const failure = FAILURE_OF_CODE.get(current.code);
      if (failure) return failure;
    }
    const { name, code } = current as { name?: unknown; code?: unknown };
    if (name === 'TimeoutError' || name === 'AbortError') return 'timeout';
    const network = networkErrorOf(current);
    if (network) return network.failure;
    // The HTTP parser's errors (HPE_*): what came back was not HTTP.
    if (typeof code === 'string' && code.startsWith('HPE_')) return 'bad_answer';
    const status = (current as { response?: { status?: unknown } }).response?.status;
    if (typeof status === 'number' && status >= 500) return failureOfStatus(status);
  }
  // fetch's "network error" with no code we know (e.g. a port fetch refuses to use): no
  // request reached Keycloak. What came back garbled would have carried an HPE_* code above.
  return isFetchFailure(err) ? 'unreachable' : 'bad_answer';
}

/**
 * Whether a call failed before its request was sent: the connection could not be made (see
 * above), or our timeout struck while it was still being made (`beforeConnect`, set by the
 * layer). Looks through `cause` chains and AggregateErrors as `failureOf` does.
 */
export function failedBeforeSending(err: unknown): boolean {
  for (const current of errorChain(err)) {
    if ((current as { beforeConnect?: unknown }).beforeConnect === true) return true;
    if (networkErrorOf(current)?.beforeSending === true) return true;
  }
  return false;
}

function isFetchFailure(err: unknown): boolean {
  return err instanceof TypeError && err.message === 'fetch failed';
}

const FAILURE_OF_CODE = new Map<ErrorCode, KeycloakFailure>(
  (Object.entries(CODE_OF) as [KeycloakFailure, ErrorCode][]).map(([failure, code]) => [
    code,
    failure,
  ]),
);

/** The AppError a client sees for `failure`; `cause` goes to the log only. */
export function keycloakError(failure: KeycloakFailure, cause?: unknown): AppError {
  return new AppError(CODE_OF[failure], { cause });
}

/** `err` as the AppError of its failure (an AppError of one of the three passes unchanged). */
export function toKeycloakError(err: unknown): AppError {
  const failure = failureOf(err);
  if (err instanceof AppError && err.code === CODE_OF[failure]) return err;
  return keycloakError(failure, err);
}

/**
 * The translated failure `err` carries: itself, or its `cause` when a library wrapped it
 * (openid-client wraps what its fetch threw); undefined when there is none.
 */
export function translatedCause(err: unknown): AppError | undefined {
  for (let current = err, depth = 0; depth < 3; depth++) {
    if (current instanceof AppError && FAILURE_OF_CODE.has(current.code)) return current;
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * A Keycloak answer a library (openid-client) would not accept: 502. The cause the log gets
 * keeps the library's message and code but not the error itself, whose `cause` may hold the
 * answer, tokens included.
 */
export function refusedAnswer(err: unknown): AppError {
  const { name, message, code, error } = (err ?? {}) as Record<string, unknown>;
  const said = [name, message, code, error].filter((part) => typeof part === 'string');
  return keycloakError('bad_answer', new Error(`answer refused: ${said.join(' ')}`));
}

/** A Keycloak answer the gateway cannot use: its status decides 502/503/504 (see above). */
export function unexpectedAnswer(what: string, status: number, detail?: string): AppError {
  const reason = `${what}: Keycloak answered ${status}${detail ? ` (${detail})` : ''}`;
  return keycloakError(status === 200 ? 'bad_answer' : failureOfStatus(status), new Error(reason));
}
