import { AppError, type ErrorCode } from '../envelope/errors.ts';
import { errorChain, networkErrorOf, type NetworkCause } from '../outbound/proxy-failures.ts';

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
 * What each cause of a failed request (outbound/proxy-failures.ts, where the network errors are
 * read) means for the client: the upstream out of reach, too slow, or an answer refused.
 */
const FAILURE_OF_CAUSE: Record<NetworkCause, KeycloakFailure> = {
  refused: 'unreachable',
  unreachable: 'unreachable',
  reset: 'unreachable',
  timeout: 'timeout',
  deadline: 'timeout',
  unasked_interim: 'bad_answer',
  bad_answer: 'bad_answer',
};

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
    if (network) return FAILURE_OF_CAUSE[network.cause];
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
 * Whether Keycloak answered the call with a refusal of this one request (a realm it does not
 * have, a search it will not run): a 4xx, but not one that any other call would get as well.
 * 401 (the service session's client or token refused), 403 (its service account not allowed),
 * 407 (a proxy in front of Keycloak wanting credentials), 408 and 429 (Keycloak or its proxy
 * overloaded, asking to slow down) say nothing of this request; nor does Keycloak down, slow or
 * answering garbage. Every other 4xx does: a status a hostile request can provoke must not stand
 * for its realm. Looks through `cause` chains as `failureOf` does: the admin session wraps such
 * answers in AppErrors of its own (`404-00001`, `401-00001`, `502-11001`).
 */
export function refusedThisRequestOnly(err: unknown): boolean {
  for (const current of errorChain(err)) {
    const status = (current as { response?: { status?: unknown } }).response?.status;
    if (typeof status === 'number') {
      return status >= 400 && status < 500 && !REFUSED_ANY_REQUEST.has(status);
    }
  }
  return false;
}

/** The 4xx answers any call of the gateway's would get alike (see refusedThisRequestOnly). */
const REFUSED_ANY_REQUEST = new Set([401, 403, 407, 408, 429]);

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
