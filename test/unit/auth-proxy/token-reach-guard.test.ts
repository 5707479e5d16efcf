import type { IncomingMessage } from 'node:http';
import type { Request, Response } from 'express';
import {
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSignedSessionReader } from '../../../src/auth/bearer/session-token.ts';
import { createReachStep } from '../../../src/auth/reach.ts';
import type { TokenDetailsStore } from '../../../src/auth/token-details.ts';
import { guardTokenReach } from '../../../src/auth-proxy/token-reach-guard.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import type { TokenReach } from '../../../src/tenancy/principal.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const PUBLIC_URL = 'https://gw.example';
const REALM = 'acme';
const ISSUER = `${PUBLIC_URL}/auth/realms/${REALM}`;
const READ_ONLY: TokenReach = { workspaces: undefined, readOnly: true, expiresAt: undefined };

let realmKey: CryptoKey;
let otherKey: CryptoKey;
let keySet: ReturnType<typeof createLocalJWKSet>;

beforeAll(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  realmKey = pair.privateKey;
  otherKey = (await generateKeyPair('RS256', { extractable: true })).privateKey;
  const jwk: JWK = { ...(await exportJWK(pair.publicKey)), kid: 'k1', use: 'sig', alg: 'RS256' };
  keySet = createLocalJWKSet({ keys: [jwk] });
});

/** An access token of `sid`, signed by the realm's key or (forged) another with its kid. */
const accessToken = (sid: string, key = realmKey) =>
  new SignJWT({ iss: ISSUER, sub: 'u1', sid, typ: 'Bearer' })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);

/** The guard over a store whose reads are counted: the database lookups it spent. */
function guarded() {
  const reads: string[] = [];
  const store = {
    recordOf: (sessionId: string) => {
      reads.push(sessionId);
      return Promise.resolve(sessionId === 'job' ? { reach: READ_ONLY } : undefined);
    },
  } as unknown as TokenDetailsStore;
  const clientAddressOf = (req: IncomingMessage) => req.socket.remoteAddress ?? '';
  const reach = createReachStep({
    store,
    cache: createMemoryCache({ maxEntries: 100 }),
    clientAddressOf,
    maxEntries: 1000,
    clock: manualClock(),
    onUseFailed: () => undefined,
  });
  const guard = guardTokenReach({
    reach,
    signedSession: createSignedSessionReader({
      jwks: { keySetFor: () => keySet },
      publicUrl: PUBLIC_URL,
    }),
    clientAddress: clientAddressOf,
    logger: pino({ level: 'silent' }),
  });
  /** What the guard did with a request from `address` carrying `token`. */
  const send = (address: string, token: string, method = 'GET') =>
    new Promise<{ status: number; error?: unknown; challenge?: unknown } | 'next'>((resolve) => {
      const headers: Record<string, string> = {};
      let status = 0;
      const res = {
        setHeader: (name: string, value: string) => void (headers[name] = value),
        writeHead: (code: number) => void (status = code),
        end: (body: string) =>
          resolve({
            status,
            error: (JSON.parse(body) as { error: unknown }).error,
            challenge: headers['www-authenticate'],
          }),
      } as unknown as Response;
      const req = {
        method,
        url: `/auth/realms/${REALM}/account/`,
        headers: { authorization: `Bearer ${token}` },
        rawHeaders: ['Authorization', `Bearer ${token}`],
        socket: { remoteAddress: address },
      } as unknown as Request;
      guard(req, res, () => resolve('next'));
    });
  return { send, reads };
}

describe('the /auth reach step and tokens no realm signed', () => {
  it('spends no lookup on forged tokens from any number of addresses, and still holds a real one to its reach', async () => {
    const { send, reads } = guarded();
    // 20 /64s of one /56, 50 forged tokens each: past any share, were they looked up.
    const forged = await Promise.all(
      Array.from({ length: 1000 }, async (_, i) =>
        send(`2001:db8:0:${i % 20}::${i}`, await accessToken(`made-up-${i}`, otherKey)),
      ),
    );
    // Passed on to Keycloak, which refuses them as it always did.
    expect(new Set(forged)).toEqual(new Set(['next']));
    expect(reads).toEqual([]);
    // A read-only job credential's token, from one of those addresses.
    const job = await accessToken('job');
    expect(await send('2001:db8:0:1::1', job, 'POST')).toMatchObject({
      status: 403,
      error: 'insufficient_scope',
    });
    expect(await send('2001:db8:0:1::1', job, 'GET')).toBe('next');
    expect(reads).toEqual(['job']);
  });

  it("checks every token a request carries: a forged copy of a job token's session does not hide the real one", async () => {
    const { send } = guarded();
    const job = await accessToken('job');
    // The same session, another key: what Keycloak ignores (say a form's `access_token` beside
    // the `subject_token` it exchanges) must not stand in for the real token's check.
    const copy = await accessToken('job', otherKey);
    expect(await send('192.0.2.1', `${copy}, ${job}`, 'POST')).toMatchObject({
      status: 403,
      error: 'insufficient_scope',
    });
  });

  it("refuses a forged token in a spelling only Keycloak's lenient reading takes, without a lookup", async () => {
    const { send, reads } = guarded();
    const forged = await accessToken('made-up', otherKey);
    expect(await send('192.0.2.1', `${forged}==`)).toEqual({
      status: 401,
      error: 'invalid_token',
      challenge:
        'Bearer error="invalid_token", error_description="The access token could not be verified."',
    });
    expect(reads).toEqual([]);
    // A real token so spelled is its own: held to its reach.
    const job = await accessToken('job');
    expect(await send('192.0.2.1', `${job}==`, 'DELETE')).toMatchObject({
      status: 403,
      error: 'insufficient_scope',
    });
    expect(reads).toEqual(['job']);
  });
});
