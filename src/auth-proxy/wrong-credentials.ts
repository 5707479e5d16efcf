import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { relayAnswer, type AnswerRelay } from './auth-proxy.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { serveSmallAnswer } from './small-answer.ts';
import { relay, type UpstreamAnswer } from '../outbound/forward.ts';
import { answerHeadersOf } from '../outbound/upstream-headers.ts';

/**
 * Wrong credentials on the token endpoint answer 401, as the platform's clients expect (see
 * docs/tokens-and-cli.md): Keycloak answered its password grant's "wrong user name or password"
 * refusal with 401 until 26.6 and answers it with 400 since, body unchanged. That
 * refusal is `invalid_grant` "Invalid user credentials": a wrong password, an unknown user, a
 * wrong or missing one-time password, a user its brute-force detection holds. Only it gets 401,
 * with Keycloak's body as sent; every other answer keeps Keycloak's status: a disabled account
 * or one not fully set up (400 before 26.6 too), any refresh-grant refusal (a dead refresh
 * token is not wrong credentials), any other error.
 */
export const WRONG_CREDENTIALS = {
  error: 'invalid_grant',
  error_description: 'Invalid user credentials',
} as const;

/** Keycloak's refusals are a few dozen bytes: a larger answer is passed on as it came. */
const MAX_REFUSAL_BYTES = 4096;

/** A 400 is read for its refusal; any other answer is relayed as it came. */
const CREDENTIALS_RELAY: AnswerRelay = {
  uncompressed: false,
  relay: (answer, res) =>
    answer.statusCode === 400 ? serveCredentialsRefusal(answer, res) : relay(answer, res),
};

/**
 * The token endpoint's step of the rule above: the answer to a password grant is relayed with
 * the status `credentialsRefusalStatus` decides; a refresh grant's, or any other, as it came.
 */
export const answerWrongCredentials401: RequestHandler = (req, _res, next) => {
  if (req.method === 'POST' && formFieldsOf(req)?.get('grant_type') === 'password') {
    relayAnswer(req, CREDENTIALS_RELAY);
  }
  next();
};

/** The status to answer Keycloak's `status` and `body` to a password grant with. */
export function credentialsRefusalStatus(status: number, body: Buffer): number {
  if (status !== 400) return status;
  let answer: unknown;
  try {
    answer = JSON.parse(body.toString('utf8'));
  } catch {
    return status;
  }
  const { error, error_description } = (answer ?? {}) as Record<string, unknown>;
  return error === WRONG_CREDENTIALS.error &&
    error_description === WRONG_CREDENTIALS.error_description
    ? 401
    : status;
}

/**
 * Answers Keycloak's 400 to a password grant: read whole, then
 * sent with the status `credentialsRefusalStatus` decides, headers and body as Keycloak sent
 * them. A compressed or larger answer passes through unchanged.
 */
export function serveCredentialsRefusal(answer: UpstreamAnswer, res: ServerResponse): void {
  const status = answer.statusCode;
  const headers = answerHeadersOf(answer);
  serveSmallAnswer(answer, res, { status, headers }, MAX_REFUSAL_BYTES, (body) => {
    res.writeHead(credentialsRefusalStatus(status, body), headers);
    res.end(body);
  });
}
