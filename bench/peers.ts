import { createPublicKey, randomBytes, type JsonWebKey } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startCommand } from './command-process.ts';

/**
 * The C peers of the side-by-side rows (README.md, "Side by side"): Apache 2.4 with
 * mod_auth_openidc and HAProxy 2.6 with `jwt_verify`, the realm's key as a PEM file, as the
 * bench's children (command-process.ts), never system services. A peer not installed does not
 * start, and its row says what it said (the Debian packages: apache2,
 * libapache2-mod-auth-openidc, haproxy).
 */
const APACHE = '/usr/sbin/apache2';
const APACHE_MODULES = '/usr/lib/apache2/modules';
const HAPROXY = '/usr/sbin/haproxy';

export interface PeerTarget {
  /** Where the peer writes its configuration, pid file and error log. */
  dir: string;
  port: number;
  /** The trivial upstream, `http://host:port`. */
  upstream: string;
}

/** Apache as README.md says: event MPM defaults, keep-alive without a limit, no access log. */
export function apacheConfig(target: PeerTarget, key: { kid: string; file: string }): string {
  const modules = [
    'mpm_event',
    'authn_core',
    'authz_core',
    'authz_user',
    'proxy',
    'proxy_http',
    'auth_openidc',
  ];
  return [
    `ServerRoot ${target.dir}`,
    `DefaultRuntimeDir ${target.dir}`,
    `PidFile ${target.dir}/apache.pid`,
    `ErrorLog ${target.dir}/apache-error.log`,
    'LogLevel warn',
    ...modules.map((m) => `LoadModule ${m}_module ${APACHE_MODULES}/mod_${m}.so`),
    // As root Apache serves as another user; as anyone else these are ignored.
    'User nobody',
    'Group nogroup',
    'ServerName 127.0.0.1',
    `Listen 127.0.0.1:${target.port}`,
    'KeepAlive On',
    'MaxKeepAliveRequests 0',
    `OIDCCryptoPassphrase ${randomBytes(24).toString('base64url')}`,
    `OIDCOAuthVerifyCertFiles ${key.kid}#${key.file}`,
    '<Location />',
    '  AuthType oauth20',
    '  Require valid-user',
    '</Location>',
    `ProxyPass / ${target.upstream}/`,
    '',
  ].join('\n');
}

/**
 * HAProxy: `threads` threads; a request passes with an RS256 token whose signature the realm's
 * key verifies and whose `exp` is ahead (what mod_auth_openidc checks too), else 401.
 */
export function haproxyConfig(target: PeerTarget, publicKeyFile: string, threads: number): string {
  const upstream = new URL(target.upstream);
  return [
    'global',
    `  nbthread ${threads}`,
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  option http-keep-alive',
    '  timeout connect 5s',
    '  timeout client 60s',
    '  timeout server 60s',
    'frontend bearer',
    `  bind 127.0.0.1:${target.port}`,
    '  http-request set-var(txn.bearer) http_auth_bearer',
    "  http-request set-var(txn.alg) var(txn.bearer),jwt_header_query('$.alg')",
    '  http-request deny deny_status 401 unless { var(txn.alg) -m str RS256 }',
    `  http-request deny deny_status 401 unless { var(txn.bearer),jwt_verify(txn.alg,"${publicKeyFile}") -m int 1 }`,
    "  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('$.exp','int')",
    '  http-request set-var(txn.now) date',
    '  http-request deny deny_status 401 unless { var(txn.exp),sub(txn.now) -m int gt 0 }',
    '  default_backend upstream',
    'backend upstream',
    `  server trivial ${upstream.hostname}:${upstream.port}`,
    '',
  ].join('\n');
}

/** Apache in the foreground (its parent process stays the one started). */
export async function startApache(target: PeerTarget, key: { kid: string; file: string }) {
  const file = path.join(target.dir, `apache-${target.port}.conf`);
  await writeFile(file, apacheConfig(target, key));
  return startCommand({ command: [APACHE, '-f', file, '-DFOREGROUND'], port: target.port });
}

/** HAProxy in the foreground with `threads` threads. */
export async function startHaproxy(target: PeerTarget, publicKeyFile: string, threads: number) {
  const file = path.join(target.dir, `haproxy-${target.port}.cfg`);
  await writeFile(file, haproxyConfig(target, publicKeyFile, threads));
  return startCommand({ command: [HAPROXY, '-db', '-f', file], port: target.port });
}

/** The realm key `kid` from the realm's JWKS as PEM: HAProxy 2.6's `jwt_verify` reads no JWKS. */
export async function signingKeyPem(jwksUrl: string, kid: string): Promise<string> {
  const res = await fetch(jwksUrl, { signal: AbortSignal.timeout(10_000) });
  const { keys } = (await res.json()) as { keys: (JsonWebKey & { kid?: string })[] };
  const jwk = keys.find((key) => key.kid === kid);
  if (!jwk) throw new Error(`no key ${kid} in ${jwksUrl}`);
  const pem = createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
  return pem.toString();
}
