import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  grantAnswerOf,
  grantAnswerText,
  holdAnswer,
  isCredentialRefusal,
  type GrantAnswer,
  type Replacement,
} from '../../../src/auth-proxy/grant-answer.ts';

const refusal = (status: number, body: unknown): GrantAnswer => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

describe('grant answers the failed-login memory keeps', () => {
  it('keeps a refusal of the credentials only', () => {
    const wrong = { error: 'invalid_grant', error_description: 'Invalid user credentials' };
    expect(isCredentialRefusal(refusal(400, wrong))).toBe(true);
    expect(isCredentialRefusal(refusal(401, wrong))).toBe(true);
    // The password may be right: the account is disabled or has actions pending.
    for (const description of ['Account disabled', 'Account is not fully set up']) {
      expect(
        isCredentialRefusal(
          refusal(400, { error: 'invalid_grant', error_description: description }),
        ),
      ).toBe(false);
    }
    expect(isCredentialRefusal(refusal(401, { error: 'invalid_client' }))).toBe(false);
    expect(isCredentialRefusal(refusal(200, wrong))).toBe(false);
    expect(isCredentialRefusal({ status: 400, headers: {}, body: '\u001f\u008b binary' })).toBe(
      false,
    );
  });

  it('reads back what it stored, and nothing else', () => {
    const answer = refusal(401, { error: 'invalid_grant' });
    expect(grantAnswerOf(grantAnswerText(answer))).toEqual(answer);
    for (const stored of [undefined, '', 'wrong_password', '{"status":"401"}', '[1]', 'null']) {
      expect(grantAnswerOf(stored)).toBeUndefined();
    }
  });
});

describe('holdAnswer', () => {
  let server: Server | undefined;
  /** What happened first: the memory storing the answer, or the client receiving it. */
  const order: string[] = [];
  afterEach(
    () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())),
  );

  type Decide = (answer: GrantAnswer) => Promise<Replacement | undefined | void>;

  /** Keycloak's refusal as the proxy relays it: an explicit head, the body in two writes. */
  const relayed = (res: ServerResponse) => {
    res.writeHead(401, { 'Content-Type': 'application/json', 'X-Other': 'kept out' });
    res.write('{"error":');
    res.end('"invalid_grant"}');
  };

  /** A server that holds its answer, runs `before` on it, then sends it; the client's view. */
  function answered(...holders: Decide[]) {
    return answeredBy(relayed, ...holders);
  }

  /** The same, with the answer written by `write`. */
  async function answeredBy(write: (res: ServerResponse) => void, ...holders: Decide[]) {
    server = createServer((_req, res) => {
      for (const decide of holders) holdAnswer(res, decide);
      write(res);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return new Promise<{ status: number; body: string; type: string | undefined; order: string[] }>(
      (resolve, reject) => {
        request({ port, host: '127.0.0.1' }, (res) => {
          let body = '';
          res.on('data', (chunk: Buffer) => (body += chunk.toString()));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body,
              type: res.headers['content-type'],
              order,
            }),
          );
        })
          .on('error', reject)
          .end();
      },
    );
  }
  it('hands the whole answer over before the client gets any of it', async () => {
    let seen: GrantAnswer | undefined;
    const got = await answered(async (answer) => {
      seen = answer;
      await new Promise((resolve) => setImmediate(resolve));
      order.push('remembered');
    });
    order.push('client');
    expect(seen).toEqual({
      status: 401,
      headers: { 'content-type': 'application/json' },
      body: '{"error":"invalid_grant"}',
    });
    expect(got).toMatchObject({ status: 401, body: '{"error":"invalid_grant"}' });
    expect(order).toEqual(['remembered', 'client']);
  });

  it('sends the replacement decide gives instead of the answer', async () => {
    const got = await answered(() =>
      Promise.resolve({ status: 400, error: 'invalid_request', description: 'not yours' }),
    );
    expect(got.status).toBe(400);
    expect(got.type).toBe('application/json');
    expect(JSON.parse(got.body)).toEqual({
      error: 'invalid_request',
      error_description: 'not yours',
    });
  });

  it('answers 503 and none of the answer when decide fails', async () => {
    const got = await answered(() => Promise.reject(new Error('database down')));
    expect(got.status).toBe(503);
    expect(got.body).not.toContain('invalid_grant');
    expect(JSON.parse(got.body)).toMatchObject({ error: 'temporarily_unavailable' });
  });

  it('stacks: the holder set last decides first, then passes the answer to the one before', async () => {
    const seen: string[] = [];
    const got = await answered(
      (answer) => {
        seen.push(`first set: ${answer.body}`);
        return Promise.resolve();
      },
      (answer) => {
        seen.push(`last set: ${answer.status}`);
        return Promise.resolve();
      },
    );
    expect(seen).toEqual(['last set: 401', 'first set: {"error":"invalid_grant"}']);
    expect(got).toMatchObject({ status: 401, body: '{"error":"invalid_grant"}' });
  });

  it("lets an answer go whose head Node writes itself (the gateway's own errors)", async () => {
    const got = await answeredBy(
      (res) => {
        res.statusCode = 504;
        res.setHeader('content-type', 'application/json');
        res.end('{"result":"504-11001"}');
      },
      () => Promise.resolve(),
      () => Promise.resolve(),
    );
    expect(got).toMatchObject({
      status: 504,
      type: 'application/json',
      body: '{"result":"504-11001"}',
    });
  });
});
