import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import { EmbeddedJWK, jwtVerify } from 'jose';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { writeLogins } from '../../../src/cli/credentials.ts';
import { generateDpopKey } from '../../../src/cli/dpop.ts';
import { formatHelp } from '../../../src/cli/help.ts';
import type { CliIo } from '../../../src/cli/io.ts';
import { runCli } from '../../../src/cli/main.ts';
import { capturingIo, piped } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/** A stand-in gateway: the token endpoint answers with whatever `grant` decides. */
const PASSWORD = 'pä:ss wörd';
const REFRESH = 'refresh-token-secret';

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none' })}.${part(claims)}.c2ln`;
}

let server: Server;
let baseUrl: string;
let configDir: string;
let forms: Array<{ at: number; form: URLSearchParams; url: string }>;
let grant: (form: URLSearchParams, res: ServerResponse) => void;

function tokens(res: ServerResponse, accessToken: string, refreshToken = REFRESH, expiresIn = 300) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      access_token: accessToken,
      expires_in: expiresIn,
      refresh_token: refreshToken,
      refresh_expires_in: 31_536_000,
      token_type: 'Bearer',
    }),
  );
}

function invalidGrant(res: ServerResponse) {
  res.writeHead(400, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({ error: 'invalid_grant', error_description: 'Invalid user credentials' }),
  );
}

/**
 * A realm's discovery document as the gateway passes it on: the issuer and the token endpoint
 * below the gateway's PUBLIC_URL, which is not the URL the CLI was given (it posts its grants
 * to the token endpoint below REALMGATE_URL all the same).
 */
function discoveryDocument(realm: string): string {
  const issuer = `http://gateway.example/auth/realms/${realm}`;
  return JSON.stringify({ issuer, token_endpoint: `${issuer}/protocol/openid-connect/token` });
}

beforeAll(async () => {
  server = createServer((req, res) => {
    // The realm's discovery document, asked for before the first grant.
    const discovery = /^\/auth\/realms\/([^/]+)\/\.well-known\/openid-configuration$/.exec(
      req.url!,
    );
    if (req.method === 'GET' && discovery) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(discoveryDocument(discovery[1]!));
      return;
    }
    // A gateway without protected-resource metadata: the CLI reads the issuer instead.
    if (req.url!.startsWith('/.well-known/oauth-protected-resource/')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    req.on('end', () => {
      const form = new URLSearchParams(text);
      forms.push({ at: Date.now(), form, url: req.url! });
      grant(form, res);
    });
  });
  baseUrl = await listenLocally(server);
});
afterAll(async () => {
  await closeServers(server);
});
beforeEach(async () => {
  forms = [];
  configDir = await mkdtemp(join(tmpdir(), 'realmgate-cli-login-'));
  return () => rm(configDir, { recursive: true, force: true });
});

class FakeTerminal extends PassThrough {
  readonly isTTY = true;
  setRawMode(): this {
    return this;
  }
}

async function run(
  argv: string[],
  stdin: CliIo['stdin'],
  onStderr?: (text: string) => void,
  wait?: CliIo['wait'],
) {
  const { io, output } = capturingIo(stdin, onStderr);
  if (wait) io.wait = wait;
  const env = { REALMGATE_URL: baseUrl, REALMGATE_CONFIG_DIR: configDir };
  const status = await runCli(argv, env, io);
  const { stdout, stderr } = output;
  for (const secret of [PASSWORD, REFRESH]) expect(stdout + stderr).not.toContain(secret);
  return { status, stdout, stderr };
}

describe('realmgate login at a terminal', () => {
  it('asks for the one-time password after a refusal and retries no sooner than 1.1 s later', async () => {
    const access = jwt({ sid: 'session-1', preferred_username: 'alice' });
    grant = (form, res) =>
      form.get('totp') === '123456' ? tokens(res, access) : invalidGrant(res);
    const terminal = new FakeTerminal();
    // The CLI's waits, recorded and not waited: the grant after one must come after it.
    const waits: { ms: number; formsBefore: number }[] = [];
    const wait = (ms: number) => {
      waits.push({ ms, formsBefore: forms.length });
      return Promise.resolve();
    };
    const { status, stdout, stderr } = await run(
      ['login', 'acme', 'Alice'],
      terminal,
      (text) => {
        if (text.startsWith('Password for')) setImmediate(() => terminal.write(`${PASSWORD}\r`));
        if (text.startsWith('One-time password')) setImmediate(() => terminal.write('123 456\r'));
      },
      wait,
    );
    expect(status).toBe(0);
    expect(stderr).toBe(
      'Password for Alice (realm acme): \n' +
        'The login was refused: a wrong password, or the account also needs a one-time password.\n' +
        'One-time password (Enter if the account has none): \n',
    );
    expect(JSON.parse(stdout)).toMatchObject({
      realm: 'acme',
      username: 'alice',
      session_id: 'session-1',
    });
    expect(forms.map(({ url }) => url)).toEqual([
      '/auth/realms/acme/protocol/openid-connect/token',
      '/auth/realms/acme/protocol/openid-connect/token',
    ]);
    expect(Object.fromEntries(forms[1]!.form)).toEqual({
      client_id: '_acme-api',
      grant_type: 'password',
      scope: 'openid offline_access',
      username: 'Alice',
      password: PASSWORD,
      totp: '123456',
    });
    expect(forms[0]!.form.has('totp')).toBe(false);
    // Keycloak's quick-login check: 1.1 s from the refusal, less what the prompt took.
    expect(waits).toHaveLength(1);
    expect(waits[0]!.formsBefore).toBe(1);
    expect(waits[0]!.ms).toBeGreaterThan(1000);
    expect(waits[0]!.ms).toBeLessThanOrEqual(1100);
  });

  it('gives up without a second try when no one-time password is typed', async () => {
    grant = (_form, res) => invalidGrant(res);
    const terminal = new FakeTerminal();
    const { status, stderr } = await run(['login', 'master', 'root'], terminal, (text) => {
      if (text.startsWith('Password for')) setImmediate(() => terminal.write(`${PASSWORD}\r`));
      if (text.startsWith('One-time password')) setImmediate(() => terminal.write('\r'));
    });
    expect(status).toBe(1);
    expect(stderr).toMatch(/\nlogin refused: Invalid user credentials\n$/);
    expect(forms).toHaveLength(1);
    expect(forms[0]!.form.get('client_id')).toBe('_platform-api');
  });
});

describe('realmgate login without a way to read the password', () => {
  it.each([
    [[], piped(`${PASSWORD}\n`), 'no terminal to ask for the password'],
    [['--password-stdin'], new FakeTerminal(), '--password-stdin reads a pipe or a file'],
  ])('refuses %j with exit 2 before asking the gateway anything', async (options, stdin, said) => {
    // A gateway that is down: any request would end the command with exit 3.
    const { io, output } = capturingIo(stdin);
    const env = { REALMGATE_URL: await refusingBaseUrl(), REALMGATE_CONFIG_DIR: configDir };
    const status = await runCli(['login', 'acme', 'alice', ...options], env, io);
    expect(status).toBe(2);
    expect(output.stderr).toContain(said);
    expect(output.stderr).not.toContain('cannot reach the gateway');
  });
});

describe('realmgate login: what the gateway answered besides tokens', () => {
  const login = () =>
    run(['login', 'acme', 'alice', '--password-stdin'], Readable.from([PASSWORD]));
  const answer =
    (status: number, body: string, headers: Record<string, string> = {}) =>
    (_form: URLSearchParams, res: ServerResponse) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(body);
    };

  it('a refusal, the throttle, an envelope error and a nonsense answer, each said in words and exit status', async () => {
    // The exit status when not 1: Keycloak's outage is 5, which automation retries.
    const cases: [typeof grant, RegExp, number?][] = [
      [
        answer(
          400,
          JSON.stringify({ error: 'invalid_grant', error_description: 'Account disabled' }),
        ),
        /^login refused: Account disabled/m,
      ],
      [
        answer(429, JSON.stringify({ error: 'too_many_attempts' }), { 'retry-after': '280' }),
        /error 429: login refused for now\. Too many failed logins\. Retry in 280 s\./,
      ],
      [
        answer(
          503,
          JSON.stringify({ data: null, message: 'Keycloak is unavailable', result: '503-11001' }),
        ),
        /error 503 503-11001: Keycloak is unavailable/,
        5,
      ],
      [
        answer(200, JSON.stringify({ token_type: 'Bearer', expires_in: 300 })),
        /error 200: unexpected answer of the token endpoint/,
      ],
      // Tokens that could not travel in a header, or would drive the terminal `token` prints to.
      ...['\u001b]0;owned\u0007', 'a b', '\u009b31m'].map((token): [typeof grant, RegExp] => [
        (_, res) => tokens(res, `${jwt({ sid: 'session-1' })}${token}`),
        /error 200: unexpected answer of the token endpoint/,
      ]),
      [
        (_, res) => tokens(res, jwt({ sid: 'session-1' }), 'refresh\u001b[2J'),
        /error 200: unexpected answer of the token endpoint/,
      ],
    ];
    for (const [answered, said, exit] of cases) {
      grant = answered;
      const { status, stderr } = await login();
      expect(status).toBe(exit ?? 1);
      expect(stderr).toMatch(said);
    }
  });
});

describe('realmgate token', () => {
  it('reuses the access token until a minute before it expires, keeping a rotated refresh token', async () => {
    let issued = 0;
    grant = (form, res) => {
      issued += 1;
      const access = jwt({ sid: 'session-1', n: issued });
      // 61 s at login: reused for one second.
      if (form.get('grant_type') === 'password') tokens(res, access, REFRESH, 61);
      else tokens(res, access, `${REFRESH}-${issued}`, 30);
    };
    const login = await run(
      ['login', 'acme', 'alice', '--password-stdin'],
      Readable.from([PASSWORD]),
    );
    expect(login.status).toBe(0);
    const first = await run(['token'], Readable.from([]));
    expect(first.stdout).toBe(`${jwt({ sid: 'session-1', n: 1 })}\n`);
    const second = await run(['token'], Readable.from([]));
    expect(second.stdout).toBe(`${jwt({ sid: 'session-1', n: 1 })}\n`);
    // A second later less than a minute is left: the next call renews it with the refresh token.
    grant = (form, res) => {
      expect(Object.fromEntries(form)).toEqual({
        client_id: '_acme-api',
        grant_type: 'refresh_token',
        refresh_token: REFRESH,
      });
      tokens(res, jwt({ sid: 'session-1', n: 2 }), `${REFRESH}-2`, 30);
    };
    // The CLI reads the system clock: the test moves it (timers stay real).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 1100 });
    let third;
    try {
      third = await run(['token'], Readable.from([]));
    } finally {
      vi.useRealTimers();
    }
    expect(third.stdout).toBe(`${jwt({ sid: 'session-1', n: 2 })}\n`);
    const file = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')) as {
      logins: Array<{ refreshToken: string }>;
    };
    expect(file.logins[0]!.refreshToken).toBe(`${REFRESH}-2`);
  });
});

describe('parsing the API client commands', () => {
  it('parses each of them, and --help lists every command', () => {
    expect(parseCommandLine(['login', 'acme', 'alice', '--password-stdin'])).toEqual({
      name: 'login',
      realm: 'acme',
      username: 'alice',
      passwordFrom: 'stdin',
      otp: false,
      job: { name: undefined, workspaces: [], readOnly: false, expiresInSeconds: undefined },
      dpop: true,
    });
    expect(parseCommandLine(['login', 'acme', 'alice', '--no-dpop'])).toMatchObject({
      dpop: false,
    });
    expect(
      parseCommandLine([
        'login',
        'acme',
        'alice',
        '--name',
        'nightly',
        '--workspace',
        'ws1',
        '--workspace',
        'ws2',
        '--read-only',
        '--expires',
        '90d',
      ]),
    ).toMatchObject({
      name: 'login',
      job: {
        name: 'nightly',
        workspaces: ['ws1', 'ws2'],
        readOnly: true,
        expiresInSeconds: 7_776_000,
      },
    });
    expect(() => parseCommandLine(['login', 'acme', 'alice', '--workspace', 'Bad!'])).toThrow();
    expect(() => parseCommandLine(['login', 'acme', 'alice', '--expires', 'soon'])).toThrow();
    expect(parseCommandLine(['token', '--realm', 'master', '--user', 'root'])).toEqual({
      name: 'token',
      select: { realm: 'master', user: 'root' },
    });
    expect(parseCommandLine(['tokens', 'revoke', '--all'])).toEqual({
      name: 'tokens revoke',
      select: {},
      id: undefined,
    });
    expect(parseCommandLine(['tokens', 'revoke', 'abc-1'])).toMatchObject({ id: 'abc-1' });
    expect(() => parseCommandLine(['tokens', 'revoke'])).toThrow('either an <id|name> or --all');
    expect(() => parseCommandLine(['tokens', 'revoke', 'x', '--all'])).toThrow('either');
    expect(() => parseCommandLine(['tokens', 'revoke', 'a/b'])).toThrow(
      'invalid token id or name: letters, digits and . _ ~ - (at most 128), as tokens list shows it',
    );
    expect(() => parseCommandLine(['login', 'acme'])).toThrow('missing <username>');
    expect(() => parseCommandLine(['login', 'acme', 'a', '--password', 'x'])).toThrow(
      '--password is refused',
    );
    expect(parseCommandLine(['logout'])).toEqual({ name: 'logout', select: {} });
    const help = formatHelp();
    for (const command of ['login <realm>', 'token ', 'tokens list', 'tokens revoke', 'logout ']) {
      expect(help).toContain(`realmgate ${command}`);
    }
  });
});

describe('usage errors of the token commands', () => {
  it('do not echo a refused word, which could be a misplaced password', () => {
    const misplaced = 'S3cret!pass';
    for (const argv of [
      ['tokens', 'revoke', misplaced],
      ['proof', misplaced, 'https://gateway.example/api/x'],
    ]) {
      let refused: unknown;
      try {
        parseCommandLine(argv);
      } catch (error) {
        refused = error;
      }
      expect(refused).toMatchObject({ kind: 'usage', exitCode: 2 });
      expect((refused as Error).message).not.toContain(misplaced);
    }
  });
});

describe('a --user no stored login matches', () => {
  it('is not echoed, as no refused word is: it could be a password pasted in its place', async () => {
    const misplaced = 'S3cret!pass';
    for (const argv of [
      ['token', '--user', misplaced],
      ['logout', '--user', misplaced, '--realm', 'acme'],
      ['proof', 'GET', 'https://gateway.example/api/x', '--user', misplaced],
    ]) {
      const answer = await run(argv, piped(''));
      expect(answer.status, argv.join(' ')).toBe(2);
      expect(answer.stderr).toContain('no stored login');
      expect(answer.stderr).not.toContain(misplaced);
    }
  });
});

describe('realmgate proof', () => {
  const url = 'http://127.0.0.1:1/api/acme/platform/workspaces?x=1';

  async function storeLogin(extra: Record<string, unknown>): Promise<string> {
    const access = jwt({ sid: 'session-1', preferred_username: 'alice' });
    const login = {
      gateway: `${baseUrl}/`,
      realm: 'acme',
      username: 'alice',
      sessionId: 'session-1',
      refreshToken: REFRESH,
      loggedInAt: new Date().toISOString(),
      accessToken: access,
      accessExpiresAt: new Date(Date.now() + 3_600_000).toISOString(),
      ...extra,
    };
    await writeLogins(join(configDir, 'credentials.json'), [login]);
    return access;
  }

  it("proves the stored login's key for the access token realmgate token prints", async () => {
    const key = await generateDpopKey();
    const access = await storeLogin({ dpopKey: key });
    const proof = await run(['proof', 'get', url], piped(''));
    expect(proof).toMatchObject({ status: 0, stderr: '' });
    expect(proof.stdout).not.toContain(key.d);
    const { payload, protectedHeader } = await jwtVerify(proof.stdout.trim(), EmbeddedJWK, {
      typ: 'dpop+jwt',
    });
    expect(protectedHeader.jwk).toEqual({ kty: 'EC', crv: 'P-256', x: key.x, y: key.y });
    expect(payload).toMatchObject({
      htm: 'GET',
      htu: 'http://127.0.0.1:1/api/acme/platform/workspaces',
      ath: createHash('sha256').update(access).digest('base64url'),
    });
    expect((await run(['token'], piped(''))).stdout.trim()).toBe(access);
  });

  it("puts the server's nonce in the proof with --nonce, and refuses one RFC 9449 does not allow", async () => {
    await storeLogin({ dpopKey: await generateDpopKey() });
    const proof = await run(['proof', 'GET', url, '--nonce', 'n-1.x'], piped(''));
    expect(proof).toMatchObject({ status: 0, stderr: '' });
    const { payload } = await jwtVerify(proof.stdout.trim(), EmbeddedJWK, { typ: 'dpop+jwt' });
    expect(payload.nonce).toBe('n-1.x');
    const refused = await run(['proof', 'GET', url, '--nonce', 'a"b'], piped(''));
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('invalid --nonce');
    expect(refused.stderr).not.toContain('a"b');
  });

  it('says a bearer login has no key, and refuses what is not a method and a URL', async () => {
    await storeLogin({});
    const bearer = await run(['proof', 'GET', url], piped(''));
    expect(bearer.status).toBe(2);
    expect(bearer.stderr).toContain('has bearer tokens (no key)');
    expect((await run(['proof', 'G T', url], piped(''))).stderr).toContain(
      'invalid method: letters only, like GET or POST',
    );
    expect((await run(['proof', 'GET', '/api/x'], piped(''))).stderr).toContain(
      'absolute http:// or https:// URL',
    );
  });
});
