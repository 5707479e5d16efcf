import { createPublicKey, generateKeyPairSync, hash, verify } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createLocalJWKSet, exportJWK, SignJWT } from 'jose';
import { pino } from 'pino';
import { authenticateRequest, type AuthenticateDeps } from '../src/auth/authenticate.ts';
import { createBearerVerifier } from '../src/auth/bearer/bearer-verifier.ts';
import type { JwksRegistry } from '../src/auth/bearer/jwks.ts';
import { htuBaseOf } from '../src/auth/dpop/dpop-htu.ts';
import { createNonceSource } from '../src/auth/dpop/dpop-nonce.ts';
import { createProofChecker, derSignatureOf } from '../src/auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from '../src/auth/dpop/dpop-replay.ts';
import { createDpopScheme } from '../src/auth/dpop/dpop-scheme.ts';
import type { RevocationList } from '../src/auth/revocation.ts';
import { createCache } from '../src/cache/index.ts';
import { ASYMMETRIC_ALGORITHMS } from '../src/config/jws-algorithms.ts';
import { newProofKey, proofPool } from './dpop-proofs.ts';
import { readArgs } from './settings.ts';
import { median } from './stats.ts';

/**
 * `taskset -c 1 node bench/dpop-cost.ts [--count 4000] [--rounds 7] [--no-redis]`: the CPU the
 * DPoP work costs (README.md), µs per item over proofs signed beforehand, rounds alternating:
 * the proof check beside its cheapest P-256 verify (target ≤ 1.2 ×), and one request's
 * authentication, Bearer against DPoP, without and with server nonces (`DPOP_NONCE`) (replay
 * store in Redis unless `--no-redis`).
 */
const args = readArgs(process.argv.slice(2), { count: 4000, rounds: 7, 'no-redis': false });

const PUBLIC_URL = 'http://127.0.0.1:28000';
const REALM = 'bench';
const PATH = `/api/${REALM}/workspaces/ws1/ita/menu/operation_list/filter/`;
const proofKey = newProofKey();
const { kty, crv, x, y } = proofKey;
const publicKey = createPublicKey({ key: { kty, crv, x, y }, format: 'jwk' });
const thumbprint = hash('sha256', JSON.stringify({ crv, kty, x, y }), 'base64url');

/** µs of CPU (user + system) per item for `work` over `items`, `concurrent` at a time. */
async function cpuPer<T>(items: T[], work: (item: T) => unknown, concurrent = 1) {
  let next = 0;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / items.length;
}

// Keycloak's part: an RS256 key and two access tokens of the same shape, one bound to the key.
const realmKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
const keySet = createLocalJWKSet({
  keys: [{ ...(await exportJWK(realmKey.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }],
});
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
const htu = PUBLIC_URL + PATH;
const spec = { privateJwk: proofKey, method: 'GET', htu, accessToken: dpopToken };

// check: the proof check function alone, and the signature check alone.
const checking = { maxAgeSeconds: 300, aheadSeconds: 5, maxCachedKeys: 100 };
const check = createProofChecker({ algorithms: ASYMMETRIC_ALGORITHMS, ...checking });
const checked = {
  method: 'GET',
  htu: htuBaseOf(PUBLIC_URL) + PATH,
  accessToken: dpopToken,
  accessTokenHash: hash('sha256', dpopToken, 'base64url'),
  boundKey: thumbprint,
};
function signatureOnly(proof: string): boolean {
  const cut = proof.lastIndexOf('.');
  const signed = Buffer.from(proof.slice(0, cut), 'latin1');
  const der = derSignatureOf(Buffer.from(proof.slice(cut + 1), 'base64url'), 32)!;
  return verify('sha256', signed, publicKey, der);
}

// auth: the gateway's authentication with the real verifier, checker and replay store.
const cache = createCache({
  redisUrl: args['no-redis'] ? undefined : (process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'),
  keyPrefix: 'realmgate-bench-auth:',
  maxEntries: 100_000,
  commandTimeoutMs: 2_000,
  logger: pino({ enabled: false }),
});
/** The gateway's DPoP scheme, with server nonces when given. */
function dpopScheme(nonces?: ReturnType<typeof createNonceSource>) {
  return createDpopScheme({
    check: createProofChecker({ ...checking, algorithms: ['ES256'], maxAgeSeconds: 60 }),
    replay: createProofReplayStore({ cache }),
    htuBase: PUBLIC_URL,
    algorithms: ['ES256'],
    ...(nonces && { nonces }),
  });
}
const nonces = createNonceSource({ secret: 'bench', slotSeconds: 60 });
const deps: AuthenticateDeps = {
  basic: {} as AuthenticateDeps['basic'],
  bearer: createBearerVerifier({
    jwks: { keySetFor: () => keySet, publishes: () => true } as unknown as JwksRegistry,
    publicUrl: PUBLIC_URL,
    leewaySeconds: 5,
    maxCachedTokens: 1000,
    lifetimes: { noteServedLifetime: () => undefined },
    metrics: { cacheLookup: () => undefined },
  }),
  dpop: dpopScheme(),
  // Nothing revoked: every question the admission asks answers false.
  revocations: new Proxy({}, { get: () => () => false }) as RevocationList,
  activeCheck: { ensureActive: () => undefined },
  resourceMetadataOf: () => `${PUBLIC_URL}/.well-known/oauth-protected-resource`,
  // No switch on: the Bearer row is the hot path of an organization that does not require DPoP.
  dpopRequired: () => false,
  clientAddressOf: () => '127.0.0.1',
  metrics: { authFailure: () => undefined },
};
/** A request as node:http hands it over, with these two headers. */
function requestWith(authorization: string, proof?: string): IncomingMessage {
  const rawHeaders = ['Host', '127.0.0.1:28000', 'Authorization', authorization];
  if (proof !== undefined) rawHeaders.push('DPoP', proof);
  return { method: 'GET', headers: { authorization }, rawHeaders } as unknown as IncomingMessage;
}
const withNonces = { ...deps, dpop: dpopScheme(nonces) };
/** One request's authentication, 32 at a time. */
const perRequest = (requests: IncomingMessage[], d = deps) =>
  cpuPer(requests, (request) => authenticateRequest(request, REALM, PATH, d), 32);
const dpopRequests = (nonce?: string) =>
  proofPool(nonce === undefined ? spec : { ...spec, nonce }, args.count).map((proof) =>
    requestWith(`DPoP ${dpopToken}`, proof),
  );

/** Each measurement: a fresh set of items per round, and how to time it. */
const measurements = {
  'check, µs/proof': () => cpuPer(proofPool(spec, args.count), (p) => check(p, checked)),
  'verify alone, µs/proof': () => cpuPer(proofPool(spec, args.count), signatureOnly),
  'Bearer authentication, µs/request': () =>
    perRequest(Array.from({ length: args.count }, () => requestWith(`Bearer ${bearerToken}`))),
  'DPoP authentication, µs/request': () => perRequest(dpopRequests()),
  'DPoP with server nonces, µs/request': () =>
    perRequest(dpopRequests(nonces.current()), withNonces),
};
type Name = keyof typeof measurements;
const names = Object.keys(measurements) as Name[];

// Warm-up: each token verified once, the proof key imported, the code compiled.
for (const name of names) await measurements[name]();
const rounds = new Map<Name, number[]>(names.map((name) => [name, []]));
for (let round = 1; round <= args.rounds; round++) {
  const order = round % 2 ? names : [...names].reverse();
  for (const name of order) rounds.get(name)!.push(await measurements[name]());
  console.log(
    `round ${round}: ${names.map((n) => `${n} ${rounds.get(n)!.at(-1)!.toFixed(1)}`).join(', ')}`,
  );
}
const medianOf = (name: Name) => median(rounds.get(name)!)!;
console.log(
  `medians of ${args.rounds} rounds of ${args.count} (${cache.kind}): ` +
    names.map((n) => `${n} ${medianOf(n).toFixed(1)}`).join(', ') +
    `; check ÷ verify ${(medianOf('check, µs/proof') / medianOf('verify alone, µs/proof')).toFixed(2)} (target ≤ 1.2)`,
);
await cache.close();
