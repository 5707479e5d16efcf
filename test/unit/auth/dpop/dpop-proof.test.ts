import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { exportJWK, importJWK, SignJWT, type CryptoKey } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { ASYMMETRIC_ALGORITHMS } from '../../../../src/config/jws-algorithms.ts';
import {
  createProofChecker,
  derSignatureOf,
  type ProofRequest,
} from '../../../../src/auth/dpop/dpop-proof.ts';
import { htuBaseOf, normalizedHtu } from '../../../../src/auth/dpop/dpop-htu.ts';
import { parseRequestTarget } from '../../../../src/edge/request-target.ts';
import {
  dpopKey,
  dpopProof,
  rawJws,
  type DpopKey,
  type ProofOptions,
} from '../../../helpers/dpop.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const clock = manualClock();
const NOW = Math.floor(clock.now() / 1000);
const URL = 'https://gw.example/api/acme/workspaces/ws1/ita/jobs';
const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';

const check = createProofChecker({
  algorithms: ASYMMETRIC_ALGORITHMS,
  maxAgeSeconds: 60,
  aheadSeconds: 5,
  maxCachedKeys: 100,
  clock,
});

let key: DpopKey;
let request: ProofRequest;
beforeAll(async () => {
  key = await dpopKey();
  request = { method: 'POST', htu: URL, accessToken: TOKEN, boundKey: key.thumbprint };
});

const proof = (options: Partial<ProofOptions> = {}, signer = key) =>
  dpopProof(signer, { method: 'POST', url: URL, accessToken: TOKEN, iat: NOW, ...options });

async function refusal(made: string | Promise<string>, against = request): Promise<string> {
  const failure = await check(await made, against).then(
    () => undefined,
    (err: unknown) => err as { scheme: string; reason: string; publicMessage: string },
  );
  expect(failure).toMatchObject({ scheme: 'dpop', reason: 'bad_proof' });
  return failure!.publicMessage;
}

describe('a DPoP proof (RFC 9449 section 4.3)', () => {
  it('passes with every check met, and tells how long its jti must be remembered', async () => {
    const checked = await check(await proof({ jti: 'j-1' }), request);
    // From now: the window and twice the 5 s a proof (or a replica's clock) may be ahead.
    expect(checked).toEqual({ jti: 'j-1', acceptableUntil: (NOW + 60 + 2 * 5) * 1000 });
  });

  it.each(['ES384', 'ES512', 'RS256', 'PS384', 'EdDSA'])('passes signed with %s', async (alg) => {
    const other = await dpopKey(alg);
    const made = await proof({}, other);
    await expect(check(made, { ...request, boundKey: other.thumbprint })).resolves.toBeDefined();
  });

  it('compares htu normalised: case of scheme and host, default port, escapes of unreserved characters', async () => {
    const spelled = 'HTTPS://GW.example:443/api/%61cme/workspaces/ws1/ita/jobs?x=1#f';
    await expect(check(await proof({ url: spelled }), request)).resolves.toBeDefined();
    expect(htuBaseOf('http://localhost:8000/')).toBe('http://localhost:8000');
  });

  it.each([
    ['another method', { method: 'GET' }, /another method/],
    ['another URL', { url: 'https://gw.example/api/acme/platform/workspaces' }, /another URL/],
    [
      'another host',
      { url: 'https://evil.example/api/acme/workspaces/ws1/ita/jobs' },
      /another URL/,
    ],
    ['an htu that is no URL', { url: 'jobs' }, /another URL/],
    ['an iat too old', { iat: NOW - 61 }, /too old/],
    ['an iat ahead', { iat: NOW + 6 }, /future/],
    ['an iat as text', { claims: { iat: String(NOW) } }, /not valid|iat/],
    ['no jti', { claims: { jti: undefined } }, /jti/],
    ['an empty jti', { jti: '' }, /jti/],
    ['no ath', { accessToken: undefined }, /ath/],
    ['the ath of another token', { accessToken: `${TOKEN}x` }, /ath/],
    ['typ JWT', { header: { typ: 'JWT' } }, /typ/],
    ['no typ', { header: { typ: undefined } }, /typ/],
    ['no jwk', { header: { jwk: undefined } }, /jwk/],
    ['a jwk that is a string', { header: { jwk: 'key' } }, /jwk/],
  ])('is refused with %s', async (_what, options, message) => {
    expect(await refusal(proof(options as Partial<ProofOptions>))).toMatch(message);
  });

  it('names the URL it expects and the one the proof names, in printable ASCII', async () => {
    const other = 'http://127.0.0.1:8000/api/acme/workspaces/ws1/ita/jobs';
    expect(await refusal(proof({ url: other }))).toBe(
      `The DPoP proof is for another URL: this gateway expects ${URL}; the proof names ${other}.`,
    );
    const hostile = await refusal(
      proof({ claims: { htu: `http://x/\u00e9\n${'a'.repeat(300)}` } }),
    );
    expect(hostile).toMatch(/the proof names http:\/\/x\/\?\?a+\.\.\.\.$/);
    expect(await refusal(proof({ claims: { htu: 7 } }))).toMatch(/the proof names no URL\.$/);
  });

  it('accepts an iat at the edges of the window, on the injected clock', async () => {
    await expect(check(await proof({ iat: NOW - 60 }), request)).resolves.toBeDefined();
    await expect(check(await proof({ iat: NOW + 5 }), request)).resolves.toBeDefined();
    const made = await proof();
    clock.advance(61_000);
    expect(await refusal(made)).toMatch(/too old/);
    clock.advance(-61_000);
  });

  it("is refused when its key is not the token's", async () => {
    const other = await dpopKey();
    expect(await refusal(proof({}, other))).toMatch(/not the key the token is bound to/);
  });

  it('is refused when the jwk holds a private key, whatever the signature', async () => {
    const privateJwk = await exportJWK(key.privateKey);
    expect(await refusal(proof({ header: { jwk: privateJwk } }))).toMatch(/private key/);
  });

  it('is refused with an RSA key under 2048 bits, before its signature is checked', async () => {
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const jwk = publicKey.export({ format: 'jwk' });
    const header = JSON.stringify({ alg: 'RS256', typ: 'dpop+jwt', jwk });
    expect(await refusal(rawJws(header, '{}'))).toBe(
      "The DPoP proof's RSA key has 1024 bits; at least 2048 bits are needed.",
    );
  });

  it('is refused when signed by another key than the one it carries', async () => {
    const other = await dpopKey();
    const forged = await proof({ header: { jwk: key.publicJwk } }, other);
    expect(await refusal(forged)).toMatch(/not valid/);
  });

  it('is refused with an algorithm outside the configured list', async () => {
    const only = createProofChecker({
      algorithms: ['RS256'],
      maxAgeSeconds: 60,
      aheadSeconds: 5,
      maxCachedKeys: 10,
      clock,
    });
    await expect(only(await proof(), request)).rejects.toMatchObject({ reason: 'bad_proof' });
  });

  it('is refused with alg none, an HMAC alg and a symmetric jwk', async () => {
    const claims = JSON.stringify({ jti: 'x', htm: 'POST', htu: URL, iat: NOW });
    const none = rawJws(
      JSON.stringify({ alg: 'none', typ: 'dpop+jwt', jwk: key.publicJwk }),
      claims,
    );
    expect(await refusal(none.slice(0, none.lastIndexOf('.') + 1) + 'AA')).toMatch(/not valid/);
    const secret = new TextEncoder().encode('a-shared-secret-of-32-bytes-long');
    const octJwk = { kty: 'oct', k: Buffer.from(secret).toString('base64url') };
    const hmac = await new SignJWT({ jti: 'x', htm: 'POST', htu: URL, iat: NOW })
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: octJwk })
      .sign(secret);
    expect(await refusal(hmac)).toMatch(/not valid/);
    const octWithAllowedAlg = rawJws(
      JSON.stringify({ alg: 'ES256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'AAAA' } }),
      claims,
    );
    expect(await refusal(octWithAllowedAlg)).toMatch(/asymmetric public key/);
  });

  it('is refused, never thrown past, when malformed', async () => {
    const claims = JSON.stringify({ jti: 'x', htm: 'POST', htu: URL, iat: NOW });
    const header = JSON.stringify({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.publicJwk });
    const nested = `{"a":${'['.repeat(3000)}${']'.repeat(3000)}}`;
    for (const bad of [
      '',
      'not-a-jws',
      'a.b',
      'a.b.c.d',
      'a b.c.d',
      rawJws('{"alg":', claims),
      rawJws(header, '{"jti":'),
      rawJws(header, '[1,2]'),
      rawJws(header, nested),
      rawJws(`{"alg":"ES256","typ":"dpop+jwt","jwk":${nested}}`, claims),
      'A'.repeat(9000) + '.b.c',
    ]) {
      await refusal(bad);
    }
  });

  it('keeps the imported key by header, and still checks every proof of it', async () => {
    const made = await proof();
    await check(made, request);
    // The key known from that header is still compared with each token's cnf.jkt.
    const other = await dpopKey();
    expect(await refusal(proof(), { ...request, boundKey: other.thumbprint })).toMatch(
      /not the key the token is bound to/,
    );
    // The same key, the same proof again: checked again in full (the replay store refuses it).
    await expect(check(made, request)).resolves.toBeDefined();
    expect(await refusal(proof({ method: 'GET' }))).toMatch(/another method/);
  });

  it('keeps one RSA key apart per algorithm: RS256 and PS256 proofs of it both verify', async () => {
    const rsa = await dpopKey('RS256');
    const bound = { ...request, boundKey: rsa.thumbprint };
    await expect(check(await proof({}, rsa), bound)).resolves.toBeDefined();
    const pssKey = await importJWK(await exportJWK(rsa.privateKey), 'PS256');
    const pss = { ...rsa, alg: 'PS256', privateKey: pssKey as CryptoKey };
    await expect(check(await proof({}, pss), bound)).resolves.toBeDefined();
  });

  it.each(['ES256', 'ES384', 'ES512', 'RS256', 'PS256', 'EdDSA'])(
    'checks the next proofs of a known %s header at once: each signature, each claim',
    async (alg) => {
      const signer = await dpopKey(alg);
      const bound = { ...request, boundKey: signer.thumbprint };
      // The first proof of the header goes through jose; the next ones through node:crypto.
      for (let i = 0; i < 3; i++) {
        await expect(check(await proof({}, signer), bound)).resolves.toBeDefined();
      }
      const made = await proof({}, signer);
      const cut = made.lastIndexOf('.') + 1;
      const tampered = `${made.slice(0, cut)}${made[cut] === 'A' ? 'B' : 'A'}${made.slice(cut + 1)}`;
      expect(await refusal(tampered, bound)).toMatch(/not valid/);
      const otherPayload = await proof({ method: 'GET' }, signer);
      const spliced = `${otherPayload.slice(0, otherPayload.lastIndexOf('.'))}${made.slice(cut - 1)}`;
      expect(await refusal(spliced, bound)).toMatch(/not valid/);
      expect(await refusal(proof({ method: 'GET' }, signer), bound)).toMatch(/another method/);
      expect(await refusal(proof({ accessToken: `${TOKEN}x` }, signer), bound)).toMatch(/ath/);
      const other = await dpopKey(alg);
      expect(await refusal(proof({}, signer), { ...request, boundKey: other.thumbprint })).toMatch(
        /not the key the token is bound to/,
      );
      // A claim jose checks (here an `exp` past) sends the proof through jose's check again.
      expect(await refusal(proof({ claims: { exp: NOW - 10 } }, signer), bound)).toMatch(
        /not valid/,
      );
      expect(await refusal(rawJws('{}', '[1]'), bound)).toBeDefined();
    },
  );
});

describe('the htu a request is checked against', () => {
  // The checker takes a proof whose htu is the request's own text without parsing it: that
  // text must be what normalizedHtu makes of it.
  it.each([
    ['https://gw.example', '/api/acme/workspaces/ws1/ita/jobs'],
    ['HTTPS://GW.Example:443/', '/api/acme/platform/users/'],
    ['http://127.0.0.1:8000', "/api/acme/x/a~b!$&'()*+,=:@-._/"],
    ['http://[::1]:8080/', '/api/%61cme/%7e/caf%c3%a9/%2a'],
    ['https://xn--bcher-kva.example', '/api/acme/%E2%9C%93'],
  ])('is left as it is by normalizedHtu: %s + %s', (publicUrl, target) => {
    const parsed = parseRequestTarget(target);
    if ('refused' in parsed) throw new Error(parsed.refused);
    const htu = htuBaseOf(publicUrl) + parsed.path;
    expect(normalizedHtu(htu)).toBe(htu);
  });
});

describe('a JWS ECDSA signature as DER', () => {
  const hex = (text: string) => Buffer.from(text.replace(/ /g, ''), 'hex');

  it('keeps each integer minimal: leading zeros dropped, a zero before a high bit', () => {
    const r = `0000${'7f'.repeat(30)}`;
    const s = `80${'01'.repeat(31)}`;
    expect(derSignatureOf(hex(r + s), 32)?.toString('hex')).toBe(
      `3043 021e ${'7f'.repeat(30)} 0221 00 80${'01'.repeat(31)}`.replace(/ /g, ''),
    );
    expect(derSignatureOf(Buffer.alloc(64), 32)?.toString('hex')).toBe('3006020100020100');
  });

  it('takes the long length form past 127 bytes (ES512), and refuses a wrong length', () => {
    const der = derSignatureOf(Buffer.alloc(132, 0xff), 66)!;
    expect(der.subarray(0, 5).toString('hex')).toBe('30818a0243');
    expect(der).toHaveLength(3 + 138);
    expect(derSignatureOf(Buffer.alloc(63), 32)).toBeUndefined();
    expect(derSignatureOf(Buffer.alloc(65), 32)).toBeUndefined();
  });

  it.each([
    ['P-256', 'sha256', 32],
    ['P-384', 'sha384', 48],
    ['P-521', 'sha512', 66],
  ] as const)('verifies as node:crypto verifies r || s (%s)', (namedCurve, digest, half) => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve });
    for (let i = 0; i < 40; i++) {
      const data = Buffer.from(`signed ${i}`);
      const signature = sign(digest, data, { key: privateKey, dsaEncoding: 'ieee-p1363' });
      if (i % 2 === 1) signature[i % signature.length]! ^= 1;
      const expected = verify(
        digest,
        data,
        { key: publicKey, dsaEncoding: 'ieee-p1363' },
        signature,
      );
      expect(verify(digest, data, publicKey, derSignatureOf(signature, half)!)).toBe(expected);
    }
  });
});
