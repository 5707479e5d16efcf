#!/usr/bin/env node
// A DPoP proof (RFC 9449) for one request, signed with the P-256 key in KEY_FILE (a private
// JWK; made, mode 0600, when the file does not exist). Needs Node 20+ and jose (npm install jose).
//
//   node dpop-proof.mjs KEY_FILE METHOD URL                 # a token request
//   ACCESS_TOKEN=... node dpop-proof.mjs KEY_FILE METHOD URL  # an API call: adds ath
//
// Prints the proof: the value of the request's DPoP header. Make a new one for every request.
import { createHash, randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import process from 'node:process';
import { URL } from 'node:url';
import { exportJWK, generateKeyPair, importJWK, SignJWT } from 'jose';

const [keyFile, method, url] = process.argv.slice(2);
if (!keyFile || !method || !url) {
  process.stderr.write('usage: node dpop-proof.mjs KEY_FILE METHOD URL\n');
  process.exit(2);
}
let jwk;
try {
  jwk = JSON.parse(await readFile(keyFile, 'utf8'));
} catch (error) {
  if (error.code !== 'ENOENT') throw error;
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  jwk = await exportJWK(privateKey);
  await writeFile(keyFile, JSON.stringify(jwk), { mode: 0o600, flag: 'wx' });
}
// The proof carries the public half only.
const { kty, crv, x, y } = jwk;
const htu = new URL(url);
htu.search = '';
htu.hash = '';
const token = process.env.ACCESS_TOKEN;
const ath = token && createHash('sha256').update(token).digest('base64url');
const proof = await new SignJWT({ htm: method.toUpperCase(), htu: htu.href, ...(ath && { ath }) })
  .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: { kty, crv, x, y } })
  .setJti(randomUUID())
  .setIssuedAt()
  .sign(await importJWK({ ...jwk, alg: 'ES256' }, 'ES256'));
process.stdout.write(`${proof}\n`);
