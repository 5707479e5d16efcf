import { generateKeyPairSync, hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createLocalJWKSet, exportJWK, SignJWT } from 'jose';
import { pino } from 'pino';
import { authenticateRequest, type AuthenticateDeps } from '../src/auth/authenticate.ts';
import { createBearerVerifier } from '../src/auth/bearer/bearer-verifier.ts';
import type { JwksRegistry } from '../src/auth/bearer/jwks.ts';
import { createProofChecker } from '../src/auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from '../src/auth/dpop/dpop-replay.ts';
import { createDpopScheme } from '../src/auth/dpop/dpop-scheme.ts';
import type { RevocationList } from '../src/auth/revocation.ts';
import { createCache } from '../src/cache/index.ts';
import { newProofKey, proofPool } from './dpop-proofs.ts';

/**
 * The CPU the authentication of one `/api` request costs, Bearer against DPoP, the gateway's
 * own code in this process (authenticate.ts with the real verifier, proof checker and replay
 * store; no HTTP, no forwarding): one token of each kind, verified once and then known, as in
 * the bench's rows, and a fresh proof per DPoP request. The replay store writes to Redis
 * (`REDIS_URL`, or 127.0.0.1:6379; keys under `realmgate-bench-auth:`, gone within a minute)
 * unless `--no-redis`. 32 requests at a time, so Redis commands can share a write. Pinned:
 *
 *     taskset -c 1 node bench/dpop-auth.ts [--requests 4000] [--rounds 5] [--no-redis]
 */

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const REQUESTS = option('requests', 4000);
const ROUNDS = option('rounds', 5);
const CONCURRENT = 32;

const PUBLIC_URL = 'http://127.0.0.1:28000';
const REALM = 'bench';
const PATH = `/api/${REALM}/workspaces/ws1/ita/menu/operation_list/filter/`;

// Keycloak's part: an RS256 key and two access tokens of the same shape, one bound to a key.
const realmKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const keySet = createLocalJWKSet({
  keys: [{ ...(await exportJWK(realmKey.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }],
});
const proofKey = newProofKey();
const { kty, crv, x, y } = proofKey;
const thumbprint = hash('sha256', JSON.stringify({ crv, kty, x, y }), 'base64url');
const now = Math.floor(Date.now() / 1000);
const accessToken = (bound: boolean) =>
  new SignJWT({
    iss: `${PUBLIC_URL}/auth/realms/${REALM}`,
    sub: 'a0c3e4b2-5d1f-4e8a-9b7c-2f6d8e1a3b5c',
    typ: bound ? 'DPoP' : 'Bearer',
    azp: 'realmgate',
    sid: 'session-1',
    realm_access: { roles: ['default-roles-bench'] },
    resource_access: { realmgate: { roles: ['ws1'] } },
    scope: 'openid profile email',
    ...(bound ? { cnf: { jkt: thumbprint } } : {}),
  })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1', typ: 'JWT' })
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .setJti(`token-${bound}`)
    .sign(realmKey.privateKey);
const [bearerToken, dpopToken] = [await accessToken(false), await accessToken(true)];

const cache = createCache({
  redisUrl: args.includes('--no-redis')
    ? undefined
    : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
  keyPrefix: 'realmgate-bench-auth:',
  maxEntries: 100_000,
  commandTimeoutMs: 2_000,
  logger: pino({ enabled: false }),
});
const algorithms = ['ES256'];
const unrevoked = () => false;
const deps: AuthenticateDeps = {
  basic: {} as AuthenticateDeps['basic'],
  bearer: createBearerVerifier({
    jwks: { keySetFor: () => keySet, publishes: () => true } as unknown as JwksRegistry,
    publicUrl: PUBLIC_URL,
    leewaySeconds: 5,
    maxCachedTokens: 1000,
    metrics: { cacheLookup: () => undefined },
  }),
  dpop: createDpopScheme({
    check: createProofChecker({
      algorithms,
      maxAgeSeconds: 60,
      aheadSeconds: 5,
      maxCachedKeys: 100,
    }),
    replay: createProofReplayStore({ cache }),
    htuBase: PUBLIC_URL,
    algorithms,
  }),
  revocations: {
    isSessionRevoked: unrevoked,
    isTokenRevoked: unrevoked,
    isClientSessionRevoked: unrevoked,
    isIssuedBeforeRevocation: unrevoked,
  } as unknown as RevocationList,
  activeCheck: { ensureActive: () => undefined },
  resourceMetadataOf: () => `${PUBLIC_URL}/.well-known/oauth-protected-resource`,
  clientAddressOf: () => '127.0.0.1',
  metrics: { authFailure: () => undefined },
};

/** A request as node:http hands it over, with these two headers. */
function requestWith(authorization: string, proof?: string): IncomingMessage {
  const rawHeaders = ['Host', '127.0.0.1:28000', 'Authorization', authorization];
  if (proof !== undefined) rawHeaders.push('DPoP', proof);
  return { method: 'GET', headers: { authorization }, rawHeaders } as unknown as IncomingMessage;
}

/** µs of CPU per request, `CONCURRENT` at a time. */
async function cpuPerRequest(requests: IncomingMessage[]): Promise<number> {
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENT }, async () => {
      while (next < requests.length)
        await authenticateRequest(requests[next++]!, REALM, PATH, deps);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / requests.length;
}

const spec = {
  privateJwk: proofKey,
  method: 'GET',
  htu: PUBLIC_URL + PATH,
  accessToken: dpopToken,
};
const bearerRequests = () =>
  Array.from({ length: REQUESTS }, () => requestWith(`Bearer ${bearerToken}`));
const dpopRequests = () =>
  proofPool(spec, REQUESTS).map((proof) => requestWith(`DPoP ${dpopToken}`, proof));

// Warm-up: each token verified once, the proof key imported, the code compiled.
await cpuPerRequest(bearerRequests());
await cpuPerRequest(dpopRequests());

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const bearer: number[] = [];
const dpop: number[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const [b, d] = [bearerRequests(), dpopRequests()];
  bearer.push(await cpuPerRequest(b));
  dpop.push(await cpuPerRequest(d));
  console.log(
    `round ${round}: Bearer ${bearer.at(-1)!.toFixed(1)}, DPoP ${dpop.at(-1)!.toFixed(1)} µs/request`,
  );
}
console.log(
  `median of ${ROUNDS} rounds of ${REQUESTS} requests (${cache.kind}): authentication costs ` +
    `Bearer ${median(bearer).toFixed(1)} µs, DPoP ${median(dpop).toFixed(1)} µs of CPU per request`,
);
await cache.close();
