import { afterEach, describe, expect, it, vi } from 'vitest';
import { gatewayFetchOf, MAX_RETRIES } from '../../../src/cli/token-fetch.ts';
import { CliError } from '../../../src/cli/errors.ts';

const BASE = new URL('https://gw.example/');
const TOKEN_URL = 'https://gw.example/auth/realms/acme/protocol/openid-connect/token';
const TOKENS = '{"access_token":"a","token_type":"Bearer","expires_in":300}';

/** The gateway's answers in turn (the last one repeated), and the bodies it was sent. */
function scriptedGateway(answers: Array<{ status: number; retryAfter?: string; body?: string }>) {
  const bodies: unknown[] = [];
  vi.stubGlobal('fetch', (_url: string, init: RequestInit) => {
    bodies.push(init.body);
    const { status, retryAfter, body } = answers.length > 1 ? answers.shift()! : answers[0]!;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
    return Promise.resolve(new Response(body ?? TOKENS, { status, headers }));
  });
  return bodies;
}

const BUSY = {
  status: 503,
  retryAfter: '1',
  body: '{"error":"temporarily_unavailable","error_description":"The database is unavailable."}',
};

/** A refresh grant through the CLI's fetch, the waits it made (ms). */
function refreshGrant() {
  const waits: number[] = [];
  const fetchOf = gatewayFetchOf(
    { baseUrl: BASE, realm: 'acme', timeoutMs: 1000 },
    { status: 0, text: '' },
    (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
  );
  const form = 'grant_type=refresh_token&refresh_token=r';
  const answer = fetchOf(TOKEN_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: form,
    redirect: 'manual',
  });
  return { answer, waits };
}

describe("the CLI's token requests and a gateway busy for a moment", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('sends a grant again once the Retry-After of a 503 is over, and takes the answer then', async () => {
    const bodies = scriptedGateway([BUSY, BUSY, { status: 200 }]);
    const { answer, waits } = refreshGrant();
    const response = await answer;
    expect(response.status).toBe(200);
    expect(await response.text()).toBe(TOKENS);
    expect(waits).toEqual([1000, 1000]);
    expect(bodies).toHaveLength(3);
    expect(new Set(bodies)).toEqual(new Set(['grant_type=refresh_token&refresh_token=r']));
  });

  it(`gives up after ${MAX_RETRIES} retries, with the gateway's error`, async () => {
    const bodies = scriptedGateway([BUSY]);
    const { answer, waits } = refreshGrant();
    await expect(answer).rejects.toBeInstanceOf(CliError);
    expect(bodies).toHaveLength(MAX_RETRIES + 1);
    expect(waits).toEqual(Array.from({ length: MAX_RETRIES }, () => 1000));
  });

  it('does not retry a 503 without Retry-After, or asking for longer than it waits', async () => {
    for (const retryAfter of [undefined, '3600', 'Wed, 21 Oct 2026 07:28:00 GMT']) {
      const bodies = scriptedGateway([{ ...BUSY, retryAfter }, { status: 200 }]);
      const { answer, waits } = refreshGrant();
      await expect(answer).rejects.toThrow(/error 503/);
      expect(bodies).toHaveLength(1);
      expect(waits).toEqual([]);
    }
  });
});
