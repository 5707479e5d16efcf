import { errors as joseErrors } from 'jose';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/envelope/errors.ts';
import {
  createKeycloakCalls,
  type KeycloakCallKind,
  type KeycloakCallOutcome,
} from '../../../src/keycloak/keycloak-calls.ts';
import {
  failedBeforeSending,
  failureOf,
  failureOfStatus,
  keycloakError,
  refusedThisRequestOnly,
  refusedAnswer,
  toKeycloakError,
  translatedCause,
  unexpectedAnswer,
} from '../../../src/keycloak/keycloak-failures.ts';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });
/** How fetch (undici) reports a socket error: a TypeError whose cause is the socket's error. */
const fetchFailed = (cause: unknown) => new TypeError('fetch failed', { cause });
/** How the admin client reports an answer with a non-2xx status. */
const answered = (status: number) =>
  Object.assign(new Error('Network response was not OK.'), { response: { status } });

describe('failureOf: the one classification of failed Keycloak calls', () => {
  const cases: [string, unknown, string][] = [
    ['refused (node:http)', withCode('connect ECONNREFUSED', 'ECONNREFUSED'), 'unreachable'],
    ['refused (fetch)', fetchFailed(withCode('connect', 'ECONNREFUSED')), 'unreachable'],
    [
      'refused on every address (AggregateError)',
      fetchFailed(new AggregateError([withCode('connect', 'ECONNREFUSED')], 'x')),
      'unreachable',
    ],
    ['reset', withCode('socket hang up', 'ECONNRESET'), 'unreachable'],
    ['DNS', withCode('getaddrinfo ENOTFOUND', 'ENOTFOUND'), 'unreachable'],
    ['DNS, try again', withCode('getaddrinfo EAI_AGAIN', 'EAI_AGAIN'), 'unreachable'],
    ['no local address', withCode('connect EADDRNOTAVAIL', 'EADDRNOTAVAIL'), 'unreachable'],
    [
      'closed by the other side (fetch)',
      fetchFailed(withCode('other side closed', 'UND_ERR_SOCKET')),
      'unreachable',
    ],
    [
      'fetch network error without a code (a blocked port)',
      fetchFailed(new Error('bad port')),
      'unreachable',
    ],
    [
      'AbortSignal.timeout',
      new DOMException('The operation timed out.', 'TimeoutError'),
      'timeout',
    ],
    ['aborted', new DOMException('aborted', 'AbortError'), 'timeout'],
    ['socket timeout', withCode('timed out', 'ETIMEDOUT'), 'timeout'],
    ['headers timeout (fetch)', fetchFailed(withCode('x', 'UND_ERR_HEADERS_TIMEOUT')), 'timeout'],
    ['connect timeout (fetch)', fetchFailed(withCode('x', 'UND_ERR_CONNECT_TIMEOUT')), 'timeout'],
    ['jose key-set timeout', new joseErrors.JWKSTimeout(), 'timeout'],
    ['not HTTP (node:http)', withCode('Parse Error', 'HPE_INVALID_CONSTANT'), 'bad_answer'],
    [
      'not HTTP (fetch)',
      fetchFailed(withCode('Parse Error', 'HPE_INVALID_CONSTANT')),
      'bad_answer',
    ],
    ['not JSON', new SyntaxError('Unexpected token'), 'bad_answer'],
    ['answered 500', answered(500), 'bad_answer'],
    ['answered 502', answered(502), 'unreachable'],
    ['answered 503', answered(503), 'unreachable'],
    ['answered 504', answered(504), 'timeout'],
    ['anything else', new Error('what?'), 'bad_answer'],
    ['not even an error', 'oops', 'bad_answer'],
  ];
  it.each(cases)('%s', (_name, err, failure) => {
    expect(failureOf(err)).toBe(failure);
  });

  it('keeps the failure of an AppError it made itself', () => {
    for (const failure of ['unreachable', 'timeout', 'bad_answer'] as const) {
      expect(failureOf(keycloakError(failure))).toBe(failure);
    }
  });
});

describe('the translation into the envelope', () => {
  it.each([
    ['unreachable', 503, '503-11001'],
    ['timeout', 504, '504-11001'],
    ['bad_answer', 502, '502-11001'],
  ] as const)('%s is %i %s, the cause kept for the log only', (failure, status, result) => {
    const cause = new Error('secret detail');
    const error = keycloakError(failure, cause);
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ status, result });
    expect(error.message).not.toContain('secret detail');
    expect(error.cause).toBe(cause);
  });

  it('translates foreign errors once and passes its own through unchanged', () => {
    const refused = fetchFailed(withCode('connect', 'ECONNREFUSED'));
    expect(toKeycloakError(refused)).toMatchObject({ status: 503, cause: refused });
    const own = keycloakError('timeout');
    expect(toKeycloakError(own)).toBe(own);
  });

  it('reads an unexpected status as 502, except the "retry later" statuses', () => {
    expect(failureOfStatus(500)).toBe('bad_answer');
    expect(failureOfStatus(404)).toBe('bad_answer');
    expect(failureOfStatus(401)).toBe('bad_answer');
    expect(failureOfStatus(503)).toBe('unreachable');
    expect(unexpectedAnswer('x', 200, 'not JSON').status).toBe(502);
    expect(unexpectedAnswer('x', 503).status).toBe(503);
    expect(unexpectedAnswer('x', 504).status).toBe(504);
  });
});

describe('what a library makes of a call', () => {
  it('a translated failure it wrapped is found again; its refusal of an answer is a 502', () => {
    const timeout = keycloakError('timeout');
    const wrapped = new Error('something went wrong', { cause: timeout });
    expect(translatedCause(wrapped)).toBe(timeout);
    expect(translatedCause(new Error('parsing error'))).toBeUndefined();
    // openid-client keeps the answer in its error's cause: the log must not get its token.
    const refusal = Object.assign(new Error('invalid response encountered'), {
      code: 'OAUTH_INVALID_RESPONSE',
      cause: { body: { access_token: 'secret.token.value' } },
    });
    const translated = refusedAnswer(refusal);
    expect(translated).toMatchObject({ status: 502, result: '502-11001' });
    expect(
      JSON.stringify(translated.cause, Object.getOwnPropertyNames(translated.cause)),
    ).not.toContain('secret');
    expect((translated.cause as Error).message).toContain('OAUTH_INVALID_RESPONSE');
  });
});

describe('admin-API requests through the layer', () => {
  const calls: [KeycloakCallKind, KeycloakCallOutcome][] = [];
  const layer = createKeycloakCalls({
    keycloakUrl: 'http://127.0.0.1:9/auth',
    timeoutMs: 1000,
    observer: {
      onCall: (kind, outcome, seconds) => {
        expect(seconds).toBeGreaterThanOrEqual(0);
        calls.push([kind, outcome]);
      },
    },
  });
  const outcomeOf = async (work: () => Promise<unknown>) => {
    calls.length = 0;
    const result: { value?: unknown; error?: unknown } = await layer.admin(work).then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    expect(calls).toHaveLength(1);
    return { ...result, outcome: calls[0]![1] };
  };

  it('hands back answers and counts them as ok', async () => {
    expect(await outcomeOf(() => Promise.resolve([{ id: 'x' }]))).toEqual({
      value: [{ id: 'x' }],
      outcome: 'ok',
    });
    expect(await outcomeOf(() => Promise.resolve(''))).toEqual({ value: '', outcome: 'ok' });
  });

  it("passes Keycloak's 4xx answers through, counted as refused", async () => {
    const conflict = answered(409);
    expect(await outcomeOf(() => Promise.reject(conflict))).toEqual({
      error: conflict,
      outcome: 'refused',
    });
  });

  it('translates every other failure', async () => {
    const expectations: [Error, number, KeycloakCallOutcome][] = [
      [fetchFailed(withCode('connect', 'ECONNREFUSED')), 503, 'unreachable'],
      [new DOMException('The operation timed out.', 'TimeoutError'), 504, 'timeout'],
      [answered(500), 502, 'bad_answer'],
      [new SyntaxError('Unexpected token'), 502, 'bad_answer'],
    ];
    for (const [err, status, outcome] of expectations) {
      const { error, outcome: seen } = await outcomeOf(() => Promise.reject(err));
      expect(error).toMatchObject({ status, cause: err });
      expect(seen).toBe(outcome);
    }
  });

  it('refuses a body that is not JSON (the client hands it back as a string)', async () => {
    const { error, outcome } = await outcomeOf(() => Promise.resolve('<html>oops</html>'));
    expect(error).toMatchObject({ status: 502, result: '502-11001' });
    expect(outcome).toBe('bad_answer');
  });
});

describe('failedBeforeSending: whether a failed call may go to another node whatever it was', () => {
  const cases: [string, unknown, boolean][] = [
    ['refused', withCode('connect ECONNREFUSED', 'ECONNREFUSED'), true],
    ['refused (fetch)', fetchFailed(withCode('connect', 'ECONNREFUSED')), true],
    ['no such host', withCode('getaddrinfo ENOTFOUND', 'ENOTFOUND'), true],
    ['connect timeout (fetch)', fetchFailed(withCode('x', 'UND_ERR_CONNECT_TIMEOUT')), true],
    ['our timeout while connecting', Object.assign(new Error('x'), { beforeConnect: true }), true],
    ['reset after sending', withCode('socket hang up', 'ECONNRESET'), false],
    ['closed before answering (fetch)', fetchFailed(withCode('x', 'UND_ERR_SOCKET')), false],
    ['socket timeout', withCode('timed out', 'ETIMEDOUT'), false],
    ['not HTTP', withCode('Parse Error', 'HPE_INVALID_CONSTANT'), false],
    ['anything else', new Error('what?'), false],
  ];
  it.each(cases)('%s', (_name, err, before) => {
    expect(failedBeforeSending(err)).toBe(before);
  });
});

describe('refusedThisRequestOnly: whether Keycloak refused this one call, not any alike', () => {
  const cases: [string, unknown, boolean][] = [
    ['answered 400', answered(400), true],
    ['answered 404', answered(404), true],
    [
      'a realm it does not have, as the admin session says it',
      new AppError('organizationNotFound', { cause: answered(404) }),
      true,
    ],
    [
      'another 4xx, as the admin session says it',
      new AppError('identityProviderBadGateway', { cause: answered(400) }),
      true,
    ],
    [
      'its service token refused',
      new AppError('gatewayServiceToken', { cause: answered(401) }),
      false,
    ],
    ['answered 401: its service session refused, whoever logs in', answered(401), false],
    ['answered 403: its service account may not read users', answered(403), false],
    [
      'answered 403, as the admin session says it',
      new AppError('identityProviderBadGateway', { cause: answered(403) }),
      false,
    ],
    ['answered 407: a proxy in front of it wants credentials', answered(407), false],
    ['answered 408: too slow to send what was asked', answered(408), false],
    ['answered 429: asked to slow down', answered(429), false],
    ['answered 414: this one lookup too long', answered(414), true],
    ['answered 500', answered(500), false],
    ['answered 503, as the layer says it', keycloakError('unreachable', answered(503)), false],
    ['timed out', keycloakError('timeout', new DOMException('x', 'TimeoutError')), false],
    ['refused the connection', fetchFailed(withCode('connect', 'ECONNREFUSED')), false],
    ['not JSON', keycloakError('bad_answer', new SyntaxError('Unexpected token')), false],
    ['anything else', new Error('what?'), false],
  ];
  it.each(cases)('%s', (_name, err, refused) => {
    expect(refusedThisRequestOnly(err)).toBe(refused);
  });
});
