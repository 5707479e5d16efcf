import type * as oidc from 'openid-client';
import { describeUnreachable, printable, readAnswerText } from './client.ts';
import { sendWithProof, type DpopKey } from './dpop.ts';
import { CliError, envelopeError } from './errors.ts';

// How the CLI's token requests travel to the gateway, and what it makes of an answer that is
// not a token endpoint's own (token-endpoint.ts holds the grants themselves).

/** Where a token request goes, and the key its proofs are signed with (none: no proof). */
export interface TokenRequestTarget {
  baseUrl: URL;
  realm: string;
  timeoutMs: number;
  dpopKey?: DpopKey;
  /**
   * The URL a proof names (`htu`): the token endpoint as the realm's discovery document names
   * it, under the gateway's `PUBLIC_URL`, which Keycloak compares the proof with, whatever
   * address (`baseUrl`) the request goes to. Absent: the URL the request goes to.
   */
  proofUrl?: string;
  /**
   * The gateway's address the login is pinned to (canonical-address.ts): a token endpoint the
   * discovery document names elsewhere is refused before any grant is sent.
   */
  pinned?: string;
}

/** The last answer the gateway gave, kept to describe one openid-client would not take. */
export interface Answer {
  status: number;
  text: string;
}

/** How many times a 503 that says when to come back (`Retry-After`) is sent again. */
export const MAX_RETRIES = 3;
/** The longest `Retry-After` waited for (seconds); a longer one is reported at once. */
export const MAX_RETRY_AFTER_SECONDS = 10;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The seconds a 503's `Retry-After` asks to wait, when it is a short one; else undefined. */
function retryAfterSecondsOf(status: number, retryAfter: string | null): number | undefined {
  if (status !== 503 || retryAfter === null || !/^\d{1,5}$/.test(retryAfter)) return undefined;
  const seconds = Number(retryAfter);
  return seconds <= MAX_RETRY_AFTER_SECONDS ? seconds : undefined;
}

/**
 * openid-client's fetch: the request to the gateway, redirects reported and not followed (a
 * password or refresh token is never replayed to wherever one points), within `timeoutMs`.
 * A token request (POST) carries a fresh proof of the target's key, if it has one, and is sent
 * once more with the nonce Keycloak asks for (`use_dpop_nonce`).
 * A 503 with `Retry-After` (the gateway busy for a moment: its lookups spent, an organization
 * not confirmed yet) is sent again once that wait is over, up to `MAX_RETRIES` times, when it
 * asks for `MAX_RETRY_AFTER_SECONDS` at most: as an API client should, so a fleet's jobs
 * refreshing in the same second are not failed for it.
 * What openid-client reads is a token endpoint's own answer (200, or a 400/401 refusal); the
 * gateway's throttle (429), its envelope errors (503 while Keycloak is down) and anything else
 * become a CliError here.
 */
export function gatewayFetchOf(
  target: TokenRequestTarget,
  last: Answer,
  wait: (ms: number) => Promise<void> = sleep,
): oidc.CustomFetch {
  const once = gatewayFetchOnce(target, last);
  return async (url, options) => {
    for (let retries = 0; ; retries++) {
      const answer = await once(url, options);
      const seconds = retryAfterSecondsOf(last.status, answer.response.headers.get('retry-after'));
      if (retries === MAX_RETRIES || seconds === undefined || 'response' in answer.outcome) {
        return answerOf(answer);
      }
      await wait(seconds * 1000);
    }
  };
}

interface Sent {
  response: Response;
  /** The answer openid-client reads (`response`), or the error the answer is (`error`). */
  outcome: { response: Response } | { error: CliError };
}

function answerOf({ outcome }: Sent): Response {
  if ('error' in outcome) throw outcome.error;
  return outcome.response;
}

function gatewayFetchOnce(
  { baseUrl, timeoutMs, dpopKey, proofUrl }: TokenRequestTarget,
  last: Answer,
): (...args: Parameters<oidc.CustomFetch>) => Promise<Sent> {
  return async (url, options) => {
    const key = options.method === 'POST' ? dpopKey : undefined;
    const target = { method: options.method, url: proofUrl ?? url };
    let response: Response;
    try {
      ({ response } = await sendWithProof(key, target, async (proof) => {
        const answer = await fetch(url, {
          method: options.method,
          headers: proof === undefined ? options.headers : { ...options.headers, dpop: proof },
          body: options.body,
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
        last.status = answer.status;
        last.text = await readAnswerText(answer, baseUrl);
        return {
          response: answer,
          status: answer.status,
          headers: answer.headers,
          text: last.text,
        };
      }));
    } catch (error) {
      throw describeUnreachable(error, baseUrl, timeoutMs);
    }
    const { status, text } = last;
    if (status === 200 || status === 400 || status === 401) {
      const contentType = response.headers.get('content-type');
      const read = new Response(text, {
        status,
        headers: contentType === null ? undefined : { 'content-type': contentType },
      });
      return { response, outcome: { response: read } };
    }
    const body = objectOf(text);
    if (status === 429 && body?.error === 'too_many_attempts') {
      return { response, outcome: { error: throttled(body, response.headers.get('retry-after')) } };
    }
    return { response, outcome: { error: unusableAnswer(status, body, baseUrl) } };
  };
}

/**
 * The gateway's login throttle refused the grant: say so in words, with the limit and the
 * wait it names, or at least the wait of its Retry-After.
 */
function throttled(body: Record<string, unknown>, retryAfter: string | null): CliError {
  const description = body.error_description;
  const wait = retryAfter !== null && /^\d+$/.test(retryAfter) ? ` Retry in ${retryAfter} s.` : '';
  const said =
    typeof description === 'string' && description !== ''
      ? printable(description)
      : `Too many failed logins.${wait}`;
  return new CliError('api', `error 429: login refused for now. ${said}`, undefined, 429);
}

/** The gateway's own errors (503 when Keycloak is down) come as an envelope; say what it says. */
export function unusableAnswer(
  status: number,
  body: Record<string, unknown> | undefined,
  baseUrl: URL,
): CliError {
  const { result, message, error } = body ?? {};
  if (typeof result === 'string' && typeof message === 'string') {
    return envelopeError(status, printable(result), printable(message));
  }
  const detail = typeof error === 'string' ? ` (${printable(error)})` : '';
  return new CliError(
    'api',
    `error ${status}: unexpected answer of the token endpoint at ${baseUrl.href}${detail}`,
    undefined,
    status,
  );
}

export function objectOf(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
