import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { throttleRefusal } from '../../../src/auth/throttle-refusal.ts';
import { createErrorHandler } from '../../../src/envelope/error-handler.ts';
import { AppError } from '../../../src/envelope/errors.ts';

/** The status, Retry-After and envelope of what the error handler answers `error` with. */
describe('the error handler', () => {
  let server: Server;
  let thrown: unknown;

  beforeAll(async () => {
    const app = express();
    app.get('/', () => {
      throw thrown;
    });
    app.use(createErrorHandler(pino({ enabled: false })));
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  function answerTo(error: unknown) {
    thrown = error;
    const { port } = server.address() as AddressInfo;
    return new Promise<{ status: number; retryAfter: unknown; body: Record<string, unknown> }>(
      (resolve, reject) => {
        request(`http://127.0.0.1:${port}/`, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              retryAfter: res.headers['retry-after'],
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
            }),
          );
        })
          .on('error', reject)
          .end();
      },
    );
  }

  it('gives a 503 without a wait of its own Retry-After: 5', async () => {
    const answer = await answerTo(new AppError('identityProviderUnavailable'));
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('5');
  });

  it("keeps the wait a 503 names (the login throttle's busy refusal): header and message agree", async () => {
    const answer = await answerTo(throttleRefusal({ kind: 'busy', retryAfter: 80 }));
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('80');
    expect(answer.body).toMatchObject({
      data: null,
      result: '503-11001',
      message: 'Logins from your address are waiting on the identity provider; retry in 80 s.',
    });
  });
});
