import { request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import type { FailedLoginMemory } from '../../../src/auth/failed-logins.ts';
import type { LoginAccounts } from '../../../src/auth/login-accounts.ts';
import type { AttemptOutcome, LoginThrottle } from '../../../src/auth/login-throttle.ts';
import { AUTH_ROUTES } from '../../../src/auth-proxy/auth-routes.ts';
import { guardFormBody } from '../../../src/auth-proxy/form-body-guard.ts';
import { createIdenticalGrants } from '../../../src/auth-proxy/identical-grants.ts';
import { throttlePasswordAttempts } from '../../../src/auth-proxy/password-attempt-throttle.ts';
import { enterScope } from '../../../src/edge/request-scope.ts';
import { parseRequestTarget } from '../../../src/edge/request-target.ts';
import { compileRoutes } from '../../../src/edge/route.ts';
import { createLogger } from '../../../src/http/logger.ts';

const TOKEN_PATH = '/auth/realms/acme/protocol/openid-connect/token';
const STALE = 'grant_type=password&client_id=app&username=job&password=stale';
const WRONG = { error: 'invalid_grant', error_description: 'Invalid user credentials' };
const read = compileRoutes([...AUTH_ROUTES]);

/** One grant at the stand-in for Keycloak, held until the test answers it. */
interface AtKeycloak {
  address: string;
  answer(status: number, body: object): void;
}

/**
 * The token endpoint's throttle step between a client and a stand-in for the proxy, which answers
 * as the test says (or nothing to a client gone, as forward does); the throttle, the failed-login
 * memory and the account look-up are the test's, so each step's wait is the test's to hold.
 * `memoryFails`: calls of the failed-login memory that fail instead.
 */
async function startHarness(memoryFails: Partial<FailedLoginMemory> = {}) {
  const remembered = new Map<string, string>();
  const begins: string[] = [];
  const settled: AttemptOutcome[] = [];
  let lookup: Promise<void> = Promise.resolve();
  const arrivals: AtKeycloak[] = [];
  const waitingForArrival: Array<(at: AtKeycloak) => void> = [];
  const serverClosed: Array<Promise<void>> = [];
  const failedLogins = {
    recall: (login) => Promise.resolve(remembered.get(login.password)),
    remember: (login, answer) => {
      const first = !remembered.has(login.password);
      remembered.set(login.password, answer);
      return Promise.resolve(first);
    },
    succeeded: () => Promise.resolve(),
    passwordSet: () => Promise.resolve(),
    ...memoryFails,
  } satisfies FailedLoginMemory;
  const accounts: LoginAccounts = {
    accountOf: async (_realm, name) => {
      await lookup;
      return { account: name };
    },
  };
  const throttle = {
    begin: (_realm: string, _username: string | undefined, address: string) => {
      begins.push(address);
      const attempt = {
        settle: (outcome: AttemptOutcome) => {
          settled.push(outcome);
          return Promise.resolve();
        },
      };
      return Promise.resolve({ kind: 'go' as const, attempt });
    },
  } as unknown as LoginThrottle;
  const identical = createIdenticalGrants({ maxWaitMs: 60_000 });
  const entered: Array<() => void> = [];
  const watched = {
    enter: (identity: readonly string[], gone: AbortSignal) => {
      const turn = identical.enter(identity, gone);
      entered.shift()?.();
      return turn;
    },
  };
  // Each listener's mount of the step, as createAuthMount builds one per listener.
  const listen = async () => {
    const app = express();
    app.use((req, res, next) => {
      const target = parseRequestTarget(req.url);
      if ('refused' in target) throw new Error(target.refused);
      const route = read(target.segments, req.method);
      enterScope(req, { requestId: 'r', target, route, principal: undefined });
      serverClosed.push(new Promise((resolve) => res.once('close', () => resolve())));
      next();
    });
    app.use(guardFormBody());
    app.use(
      throttlePasswordAttempts(
        {
          throttle,
          failedLogins,
          accounts,
          // No account is locked here.
          locks: {
            blockOf: () => Promise.resolve({ twoFactor: false, lockedOut: false }),
            firstRefusal: () => true,
            refusedDuringLock: () => undefined,
            ended: () => undefined,
          },
          clientAddress: (req) => String(req.headers['x-address']),
          metrics: { authFailure: () => undefined },
          logger: createLogger('silent'),
        },
        'grant',
        watched,
      ),
    );
    app.use((req, res: ServerResponse) => {
      if (res.closed) return;
      const at: AtKeycloak = {
        address: String(req.headers['x-address']),
        answer(status, body) {
          res.statusCode = status;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(body));
        },
      };
      const waiter = waitingForArrival.shift();
      if (waiter) waiter(at);
      else arrivals.push(at);
    });
    return new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
  };
  const servers = [await listen(), await listen()];
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  return {
    servers,
    /** Resolves once the next grant has asked for its turn among the identical ones. */
    entered: () => new Promise<void>((resolve) => entered.push(resolve)),
    begins,
    settled,
    holdLookups() {
      let open = () => {};
      lookup = new Promise((resolve) => (open = resolve));
      return () => {
        lookup = Promise.resolve();
        open();
      };
    },
    /** The next grant to reach Keycloak. */
    atKeycloak: () =>
      arrivals.length > 0
        ? Promise.resolve(arrivals.shift()!)
        : new Promise<AtKeycloak>((resolve) => waitingForArrival.push(resolve)),
    /** How many grants have reached Keycloak and are not answered yet. */
    waitingAtKeycloak: () => arrivals.length,
    /** Resolves once the server has seen the `n`th request (from 0) closed. */
    closedOnServer: (n: number) => serverClosed[n]!,
    /** Resolves once the server has seen `n` requests. */
    requestsSeen: (n: number) =>
      new Promise<void>((resolve) => {
        const look = () => (serverClosed.length >= n ? resolve() : setImmediate(look));
        look();
      }),
    grant(address: string, form = STALE, listener = 0) {
      const client = new AbortController();
      const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: '127.0.0.1',
            port: ports[listener],
            path: TOKEN_PATH,
            method: 'POST',
            agent: false,
            signal: client.signal,
            headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-address': address },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () =>
              resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }),
            );
          },
        );
        req.on('error', reject);
        req.end(form);
      });
      return { answer, hangUp: () => client.abort() };
    },
  };
}

describe('identical password grants at the token endpoint, whose clients leave', () => {
  let harness: Awaited<ReturnType<typeof startHarness>> | undefined;
  afterEach(async () => {
    for (const server of harness?.servers ?? []) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('the first leaving before its turn began leaves the identical grants after it answered', async () => {
    harness = await startHarness();
    const openLookups = harness.holdLookups();
    const first = harness.grant('10.0.0.1');
    await harness.requestsSeen(1);
    first.hangUp();
    await first.answer.catch(() => undefined);
    await harness.closedOnServer(0);
    openLookups();
    const next = harness.grant('10.0.0.2');
    const atKeycloak = await harness.atKeycloak();
    expect(atKeycloak.address).toBe('10.0.0.2');
    atKeycloak.answer(401, WRONG);
    expect((await next.answer).status).toBe(401);
    // The first never took a throttle reservation it could not give back.
    expect(harness.begins).toEqual(['10.0.0.2']);
  });

  it('the first ending with no answer to share lets one identical grant reach Keycloak at a time', async () => {
    harness = await startHarness();
    const first = harness.grant('10.0.0.1');
    const firstAt = await harness.atKeycloak();
    const waiting = [2, 3, 4].map((i) => harness!.grant(`10.0.0.${i}`));
    await harness.requestsSeen(4);
    // Keycloak could not answer the first.
    firstAt.answer(502, { error: 'bad_gateway' });
    expect((await first.answer).status).toBe(502);
    const second = await harness.atKeycloak();
    second.answer(401, WRONG);
    const answers = await Promise.all(waiting.map((grant) => grant.answer));
    expect(answers.map((answer) => answer.status)).toEqual([401, 401, 401]);
    // The others were answered what the second was refused, without Keycloak.
    expect(harness.waitingAtKeycloak()).toBe(0);
    expect(harness.begins).toHaveLength(2);
  });

  it('a waiting grant whose client leaves goes no further and takes no throttle reservation', async () => {
    harness = await startHarness();
    const right = 'grant_type=password&client_id=app&username=job&password=right';
    const first = harness.grant('10.0.0.1', right);
    const firstAt = await harness.atKeycloak();
    const waiting = harness.grant('10.0.0.2', right);
    await harness.requestsSeen(2);
    waiting.hangUp();
    await waiting.answer.catch(() => undefined);
    await harness.closedOnServer(1);
    firstAt.answer(200, { access_token: 'token' });
    expect((await first.answer).status).toBe(200);
    // After the first's settlement, a grant of another address goes on: the one gone did not.
    const later = harness.grant('10.0.0.3', right);
    (await harness.atKeycloak()).answer(200, { access_token: 'token' });
    expect((await later.answer).status).toBe(200);
    expect(harness.begins).toEqual(['10.0.0.1', '10.0.0.3']);
  });

  it('an identical grant to the other listener waits for the one in flight too', async () => {
    harness = await startHarness();
    const first = harness.grant('10.0.0.1', STALE, 0);
    const firstAt = await harness.atKeycloak();
    const entered = harness.entered();
    const second = harness.grant('10.0.0.2', STALE, 1);
    await entered;
    firstAt.answer(401, WRONG);
    const answers = await Promise.all([first.answer, second.answer]);
    expect(answers.map((answer) => answer.status)).toEqual([401, 401]);
    // The second was answered what the first was refused, without Keycloak.
    expect(harness.waitingAtKeycloak()).toBe(0);
    expect(harness.begins).toEqual(['10.0.0.1']);
  });
});

describe('a password grant whose outcome the failed-login memory cannot keep', () => {
  let harness: Awaited<ReturnType<typeof startHarness>> | undefined;
  afterEach(async () => {
    for (const server of harness?.servers ?? []) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('gives its reservation back before its client gets the answer', async () => {
    const down = () => Promise.reject(new Error('the cache failed'));
    harness = await startHarness({ remember: down, succeeded: down });
    for (const [form, status, body] of [
      [STALE, 401, WRONG],
      ['grant_type=password&client_id=app&username=job&password=right', 200, { access_token: 't' }],
    ] as const) {
      const grant = harness.grant('10.0.0.1', form);
      (await harness.atKeycloak()).answer(status, body);
      expect((await grant.answer).status).toBe(status);
    }
    // Nothing to count that the memory could not keep: each reservation given back, not held
    // until it expires.
    expect(harness.settled).toEqual(['released', 'released']);
  });
});
