import { execFile } from 'node:child_process';
import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CliIo } from '../../../src/cli/io.ts';
import { runCli } from '../../../src/cli/main.ts';
import { errorCodes } from '../../../src/envelope/errors.ts';
import { VERSION } from '../../../src/release/version.ts';
import { capturingIo, piped } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/**
 * A stand-in for the gateway's HTTP API: records what the CLI sends and answers with whatever
 * the test set. It checks request building, not the gateway.
 */
interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: unknown;
}

const USERNAME = 'admin';
const PASSWORD = 'pä:ss wörd';
const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln';
const BASIC_ENV = { REALMGATE_USERNAME: USERNAME, REALMGATE_PASSWORD: PASSWORD };
/** The password of the user the CLI creates; must never show in its output. */
const NEW_PASSWORD = 'n3w:Pässword';

let server: Server;
let baseUrl: string;
let recorded: Recorded[];
let answer: (res: ServerResponse) => void;

function envelope(status: number, data: unknown, result = '000-00000', message = 'SUCCESS') {
  return (res: ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data, message, result, ts: '2026-01-02T03:04:05.678Z' }));
  };
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      recorded.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: text ? JSON.parse(text) : undefined,
      });
      answer(res);
    });
  });
  baseUrl = await listenLocally(server);
});

afterAll(async () => {
  await closeServers(server);
});

beforeEach(() => {
  recorded = [];
  answer = envelope(200, { id: 'x' });
});

/** A pipe or file on stdin: what `--password-stdin` reads. */

/**
 * A terminal on stdin: `isTTY`, raw mode recorded, and keys typed by the test. A real terminal
 * echoes only while raw mode is off, so the test also checks raw mode is on while it types.
 */
class FakeTerminal extends PassThrough {
  readonly isTTY = true;
  readonly rawModes: boolean[] = [];
  setRawMode(mode: boolean): this {
    this.rawModes.push(mode);
    return this;
  }
  get isRaw(): boolean {
    return this.rawModes.at(-1) === true;
  }
}

interface RunOptions {
  stdin?: CliIo['stdin'];
  /** Sees each text written to stderr, e.g. to answer a prompt. */
  onStderr?: (text: string) => void;
}

async function run(
  argv: string[],
  env: Record<string, string> = BASIC_ENV,
  timeoutMs?: number,
  options: RunOptions = {},
) {
  const { io, output } = capturingIo(options.stdin, options.onStderr);
  const status = await runCli(argv, { REALMGATE_URL: baseUrl, ...env }, io, { timeoutMs });
  const { stdout, stderr } = output;
  for (const secret of [
    PASSWORD,
    TOKEN,
    NEW_PASSWORD,
    Buffer.from(`${USERNAME}:${PASSWORD}`).toString('base64'),
  ]) {
    expect(stdout + stderr).not.toContain(secret);
  }
  return { status, stdout, stderr };
}

describe('realmgate CLI against a stand-in API', () => {
  it.each([
    [
      ['org', 'create', 'acme'],
      'POST',
      '/api/platform/organizations',
      { id: 'acme', name: 'acme' },
    ],
    [
      ['org', 'create', 'acme', '--name', 'ACME Inc.'],
      'POST',
      '/api/platform/organizations',
      { id: 'acme', name: 'ACME Inc.' },
    ],
    [
      ['workspace', 'create', 'acme', 'ws1'],
      'POST',
      '/api/platform/organizations/acme/workspaces',
      { id: 'ws1', name: 'ws1' },
    ],
    [
      [
        'workspace',
        'create',
        'acme',
        'ws1',
        '--name',
        'One',
        '--description',
        'Main',
        '--environment',
        'dev',
        '--environment',
        'prod',
      ],
      'POST',
      '/api/platform/organizations/acme/workspaces',
      { id: 'ws1', name: 'One', description: 'Main', environments: ['dev', 'prod'] },
    ],
    [
      ['user', 'create', 'master', 'root', '--password-stdin'],
      'POST',
      '/api/platform/users',
      { username: 'root', password: NEW_PASSWORD },
    ],
    [
      [
        'user',
        'create',
        'acme',
        'alice',
        '--password-stdin',
        '--workspace',
        'ws1',
        '--workspace',
        'ws2',
      ],
      'POST',
      '/api/platform/organizations/acme/users',
      { username: 'alice', password: NEW_PASSWORD, workspaces: ['ws1', 'ws2'] },
    ],
    [
      ['operation', 'add', 'acme', 'ws1', '--name', 'nightly'],
      'POST',
      '/api/platform/organizations/acme/workspaces/ws1/operations',
      { operation_name: 'nightly' },
    ],
    [
      [
        'operation',
        'add',
        'acme',
        'ws1',
        '--name',
        'nightly',
        '--environment',
        'prod',
        '--remarks',
        'r',
        '--scheduled',
        '2026-05-01',
      ],
      'POST',
      '/api/platform/organizations/acme/workspaces/ws1/operations',
      {
        operation_name: 'nightly',
        environment: 'prod',
        remarks: 'r',
        scheduled_date_for_execution: '2026-05-01T00:00:00.000Z',
      },
    ],
    [['lifetimes', 'show', 'master'], 'GET', '/api/platform/token-lifetimes', undefined],
    [
      ['lifetimes', 'show', 'acme'],
      'GET',
      '/api/platform/organizations/acme/token-lifetimes',
      undefined,
    ],
    [
      ['lifetimes', 'set', 'master', '--access', '1d', '--offline-max-enabled', 'true'],
      'PATCH',
      '/api/platform/token-lifetimes',
      { access_token_lifespan: 86_400, offline_session_max_lifespan_enabled: true },
    ],
    [
      [
        'lifetimes',
        'set',
        'acme',
        '--client-idle',
        '1h',
        '--client-max',
        '2h',
        '--offline-idle',
        '365d',
        '--offline-max',
        '30',
      ],
      'PATCH',
      '/api/platform/organizations/acme/token-lifetimes',
      {
        client_session_idle_timeout: 3600,
        client_session_max_lifespan: 7200,
        offline_session_idle_timeout: 31_536_000,
        offline_session_max_lifespan: 30,
      },
    ],
  ])('%j sends %s %s', async (argv, method, path, body) => {
    answer = envelope(200, { created: true });
    const stdin = piped(`${NEW_PASSWORD}\n`);
    const { status, stdout, stderr } = await run(argv, BASIC_ENV, undefined, { stdin });
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
    expect(stdout).toBe('{\n  "created": true\n}\n');
    expect(recorded).toHaveLength(1);
    const [request] = recorded;
    expect(request).toMatchObject({ method, url: path, body });
    expect(request!.headers.authorization).toBe(
      `Basic ${Buffer.from(`${USERNAME}:${PASSWORD}`, 'utf8').toString('base64')}`,
    );
    expect(request!.headers['content-type']).toBe(
      body === undefined ? undefined : 'application/json',
    );
  });

  it('sends a bearer token, and keeps a path prefix of REALMGATE_URL', async () => {
    const { status } = await run(['lifetimes', 'show', 'master'], {
      REALMGATE_TOKEN: `${TOKEN}\n`,
      REALMGATE_URL: `${baseUrl}/gw`,
    });
    expect(status).toBe(0);
    expect(recorded[0]).toMatchObject({
      url: '/gw/api/platform/token-lifetimes',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
  });

  it.each([
    [404, '404-00001', 'Organization not found.'],
    [401, '401-00002', 'Authentication failed.'],
    [403, '403-00001', 'Permission denied.'],
    [400, '400-00002', 'Bad request body.'],
    [503, '503-00003', 'The database is unavailable; retry later.'],
  ])('reports an API error %i %s on stderr and exits 1', async (httpStatus, result, message) => {
    answer = envelope(httpStatus, null, result, message);
    const { status, stdout, stderr } = await run(['workspace', 'create', 'acme', 'ws1']);
    expect(status).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(`error ${httpStatus} ${result}: ${message}\n`);
  });

  // The gateway's own table: the CLI names these codes without importing it (its bundle).
  it.each(
    [
      errorCodes.identityProviderUnavailable,
      errorCodes.identityProviderTimeout,
      errorCodes.identityProviderBadGateway,
    ].map(({ status, result, message }) => [status, result, message] as const),
  )(
    'reports a Keycloak failure %i %s on stderr and exits 5',
    async (httpStatus, result, message) => {
      answer = envelope(httpStatus, null, result, message);
      const { status, stdout, stderr } = await run(['workspace', 'create', 'acme', 'ws1']);
      expect(status).toBe(5);
      expect(stdout).toBe('');
      expect(stderr).toBe(`error ${httpStatus} ${result}: ${message}\n`);
    },
  );

  it('treats a 2xx answer without the success result as an error', async () => {
    answer = envelope(200, null, '500-99999', 'Unexpected\u001b[31m error.');
    const { status, stderr } = await run(['org', 'create', 'acme']);
    expect(status).toBe(1);
    expect(stderr).toBe('error 200 500-99999: Unexpected [31m error.\n');
  });

  it('reports an answer that is not an envelope', async () => {
    answer = (res) =>
      res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad Gateway</h1>');
    const { status, stderr } = await run(['org', 'create', 'acme']);
    expect(status).toBe(1);
    expect(stderr).toBe(`error 502: the answer of ${baseUrl}/ is not an envelope\n`);
  });

  it.each([
    ['arrays', '[', ']'],
    ['objects', '{"a":', '}'],
  ])(
    'says an answer of %s nested thousands deep is not an envelope, without a stack trace',
    async (_, open, close) => {
      // Far under 16 MiB, and JSON.parse takes it; printing it would overflow the stack.
      const depth = 100_000;
      const data = `${open.repeat(depth)}${close.repeat(depth)}`.replace('{"a":}', '{}');
      answer = (res) =>
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(
            `{"data":${data},"message":"SUCCESS","result":"000-00000","ts":"2026-01-02T03:04:05.678Z"}`,
          );
      for (const argv of [
        ['org', 'get', 'acme'],
        ['tokens', 'list'],
      ]) {
        const { status, stdout, stderr } = await run(argv);
        expect({ status, stdout, stderr }).toEqual({
          status: 1,
          stdout: '',
          stderr: `error 200: the answer of ${baseUrl}/ is nested deeper than 64 levels; not read\n`,
        });
      }
    },
  );

  it('reports a redirect instead of following it with the credentials', async () => {
    answer = (res) =>
      res
        .writeHead(301, { location: 'https://elsewhere.example/api/platform/organizations' })
        .end();
    const { status, stderr } = await run(['org', 'create', 'acme']);
    expect(status).toBe(1);
    expect(stderr).toContain('error 301: the gateway redirects to https://elsewhere.example/');
    expect(recorded).toHaveLength(1);
  });

  it('exits 3 when the gateway is unreachable', async () => {
    const refusing = await refusingBaseUrl();
    const { status, stderr } = await run(['org', 'create', 'acme'], {
      ...BASIC_ENV,
      REALMGATE_URL: refusing,
    });
    expect(status).toBe(3);
    expect(stderr).toBe(
      `realmgate: cannot reach the gateway at ${refusing}/ (ECONNREFUSED); is it running? REALMGATE_URL selects another address\n`,
    );
  });

  it('exits 3 when the gateway does not answer in time', async () => {
    answer = () => {}; // never answers
    const { status, stderr } = await run(['lifetimes', 'show', 'master'], BASIC_ENV, 200);
    expect(status).toBe(3);
    expect(stderr).toBe(`realmgate: no answer from the gateway at ${baseUrl}/ within 0.2 s\n`);
  });

  it('prints help without credentials or requests', async () => {
    const { status, stdout } = await run(['user', 'create', '--help'], {});
    expect(status).toBe(0);
    expect(stdout).toContain('realmgate user create <realm> <username> [--password-stdin]');
    expect(stdout).toContain('[--otp]');
    expect(stdout).toContain(
      `  printf '%s\\n' "$PW" | realmgate user create acme alice --password-stdin\n`,
    );
    expect(stdout).not.toContain('--password <');
    expect(stdout).not.toContain('--otp-secret');
    expect(stdout).not.toContain('realmgate org create');
    const full = await run(['--help'], {});
    // Every command of the CLI (issue: `realmgate --help` lists them all).
    for (const command of [
      'org create',
      'org list',
      'org get',
      'org delete',
      'org disable',
      'org enable',
      'workspace create',
      'workspace list',
      'workspace delete',
      'user create',
      'user list',
      'user get|disable|enable|delete',
      'user passwd',
      'user grant|revoke',
      'operation add',
      'lifetimes show',
      'lifetimes set',
      'realms protect',
      'realms refresh-keys',
      'login',
      'token',
      'tokens list',
      'tokens revoke',
      'logout',
    ]) {
      expect(full.stdout).toMatch(
        new RegExp(`^  realmgate ${command.replace(/\|/g, '\\|')}( |$)`, 'm'),
      );
    }
    // Shell examples stay on one line, as they are typed.
    expect(full.stdout).toContain(
      `  printf '%s\\n%s\\n' "$PW" "$OTP" | realmgate login acme alice --password-stdin\n`,
    );
    expect(full.stdout).toContain('REALMGATE_URL');
    expect(recorded).toHaveLength(0);
  });

  it('runs as `node bin/realmgate.js --help`', async () => {
    const bin = fileURLToPath(new URL('../../../bin/realmgate.js', import.meta.url));
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, '--help'], {
      timeout: 30_000,
    });
    expect(stdout).toContain('Usage: realmgate <command> [options]');
    expect(stderr).toBe('');
  }, 30_000);
});

describe('audit list|export against a broken or hostile stand-in', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'realmgate-cli-audit-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('says a success envelope of another shape is no audit log page, without a stack trace', async () => {
    const bin = fileURLToPath(new URL('../../../bin/realmgate.js', import.meta.url));
    const runBin = (args: string[]) =>
      promisify(execFile)(process.execPath, [bin, ...args], {
        env: { ...process.env, REALMGATE_URL: baseUrl, REALMGATE_TOKEN: TOKEN },
        timeout: 30_000,
      }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
    const notAPage = `the answer of ${baseUrl}/ is not an audit log page\n`;
    for (const data of [
      {},
      { records: {}, total: 1, next: null },
      { records: [{ seq: 1, at: 5, action: {} }], total: 1, next: null },
      { records: [], total: '1', next: null },
    ]) {
      answer = envelope(200, data);
      for (const args of [
        ['audit', 'list', 'master'],
        ['audit', 'list', 'master', '--json'],
      ]) {
        const { code, stderr } = await runBin(args);
        expect(code, JSON.stringify(data)).toBe(1);
        expect(stderr).toBe(notAPage);
      }
    }
  }, 60_000);

  it("audit export keeps no file of an answer in another format (a proxy's HTML page)", async () => {
    answer = (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Sign in</h1>');
    const file = join(dir, 'proxied.csv');
    const { status, stderr } = await run(
      ['audit', 'export', 'master', '--format', 'csv', '--out', file],
      { REALMGATE_TOKEN: TOKEN },
    );
    expect(status).toBe(1);
    expect(stderr).toBe(
      `error 200: the answer of ${baseUrl}/ is text/html, not the text/csv export asked for\n`,
    );
    await expect(readdir(dir)).resolves.not.toContain('proxied.csv');
    await expect(readdir(dir)).resolves.not.toContain('proxied.csv.part');
  });

  it('audit export cut off midway: exit 3, saying so, and no file', async () => {
    answer = (res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"seq":1}\n');
      // The gateway's database failed midway: it drops the connection (route-table.ts).
      setImmediate(() => res.socket?.destroy());
    };
    const file = join(dir, 'cut.jsonl');
    const { status, stderr } = await run(['audit', 'export', 'master', '--out', file], {
      REALMGATE_TOKEN: TOKEN,
    });
    expect(status).toBe(3);
    expect(stderr).toMatch(
      new RegExp(
        `^realmgate: the export from ${baseUrl}/ was cut off after \\d+ bytes \\(.+\\); ` +
          `nothing was written to ${file}: run it again\n$`,
      ),
    );
    await expect(readdir(dir)).resolves.not.toContain('cut.jsonl');
    await expect(readdir(dir)).resolves.not.toContain('cut.jsonl.part');
  });
});

describe('a hostile or broken gateway', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'realmgate-cli-hostile-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /**
   * An envelope whose `data` is a string of 64 MiB, sent a MiB at a time as the CLI reads it:
   * a client without a bound holds all of it.
   */
  const huge = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"data":"');
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    let sent = 0;
    const more = () => {
      while (!res.destroyed && sent < 64) {
        sent++;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      if (!res.destroyed) res.end('","message":"SUCCESS","result":"000-00000","ts":"x"}');
    };
    more();
  };

  it.each([
    ['an API call', ['org', 'list'], BASIC_ENV],
    ['a login (its discovery document)', ['login', 'master', 'admin', '--password-stdin'], {}],
  ])('%s reads at most 16 MiB of an answer: exit 1, saying so', async (_, argv, env) => {
    answer = huge;
    const { status, stdout, stderr } = await run(
      argv,
      { ...env, REALMGATE_CONFIG_DIR: dir },
      undefined,
      { stdin: piped(`${PASSWORD}\n`) },
    );
    expect({ status, stdout, stderr }).toEqual({
      status: 1,
      stdout: '',
      stderr: `error 200: the answer of ${baseUrl}/ is larger than 16 MiB; not read\n`,
    });
  });

  /** Audit log pages: `next` as `nextOf` makes it of the `after` asked for (none: null). */
  const pages = (nextOf: (after: number | null) => number | null, total = 3) => {
    answer = (res) => {
      const url = new URL(recorded.at(-1)!.url, baseUrl);
      const after = url.searchParams.has('after') ? Number(url.searchParams.get('after')) : null;
      // A client that never stops is stopped here, so the test fails instead of hanging.
      if (recorded.length > 50) return envelope(200, {})(res);
      const seq = (after ?? 100) - 1;
      envelope(200, { records: [{ seq, action: 'x' }], total, next: nextOf(after) })(res);
    };
  };

  it.each([
    ['the same cursor again', () => 99],
    ['an endless chain of cursors', (after: number | null) => (after ?? 100) - 1],
  ])('audit list --all stops on %s: exit 1, saying so', async (_, nextOf) => {
    pages(nextOf);
    for (const json of [[], ['--json']]) {
      recorded = [];
      const { status, stderr } = await run(['audit', 'list', 'master', '--all', ...json], {
        REALMGATE_TOKEN: TOKEN,
      });
      expect(status).toBe(1);
      expect(stderr).toMatch(
        new RegExp(
          `^the audit log pages of ${baseUrl}/ (do not move on|go on past).*: stopped after \\d+ records\n$`,
        ),
      );
      expect(recorded.length).toBeLessThanOrEqual(4);
    }
  });

  it('audit list --max stops on a page without records that names a next one', async () => {
    answer = (res) =>
      recorded.length > 50
        ? envelope(200, {})(res)
        : envelope(200, { records: [], total: 3, next: 7 - recorded.length })(res);
    const { status, stderr } = await run(['audit', 'list', 'master', '--max', '5'], {
      REALMGATE_TOKEN: TOKEN,
    });
    expect(status).toBe(1);
    expect(stderr).toMatch(new RegExp(`^the audit log pages of ${baseUrl}/ `));
    expect(recorded).toHaveLength(1);
  });

  it('audit export that takes longer than the timeout, never silent for as long, is whole', async () => {
    answer = (res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      let seq = 0;
      const tick = setInterval(() => {
        res.write(`{"seq":${++seq}}\n`);
        if (seq === 6) {
          clearInterval(tick);
          res.end();
        }
      }, 100);
    };
    const file = join(dir, 'slow.jsonl');
    const { status, stdout } = await run(
      ['audit', 'export', 'master', '--out', file],
      { REALMGATE_TOKEN: TOKEN },
      400,
    );
    expect(status).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ file, bytes: 6 * 10 });
    await expect(readFile(file, 'utf8')).resolves.toMatch(/^\{"seq":1\}\n(.|\n)*\{"seq":6\}\n$/);
  });

  it('audit export that stalls midway: exit 3 after the timeout, and no file', async () => {
    answer = (res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"seq":1}\n'); // and then nothing, the connection kept open
    };
    const file = join(dir, 'stalled.jsonl');
    const { status, stderr } = await run(
      ['audit', 'export', 'master', '--out', file],
      { REALMGATE_TOKEN: TOKEN },
      300,
    );
    expect(status).toBe(3);
    expect(stderr).toBe(
      `realmgate: the export from ${baseUrl}/ was cut off after 10 bytes (no data for 0.3 s); ` +
        `nothing was written to ${file}: run it again\n`,
    );
    await expect(readdir(dir)).resolves.not.toContain('stalled.jsonl');
    await expect(readdir(dir)).resolves.not.toContain('stalled.jsonl.part');
  });

  it('prints no C1 control character of an answer to the terminal, as JSON escapes', async () => {
    // U+009B is CSI, U+009D OSC: terminals that take C1 controls run what follows.
    const data = { id: 'acme', name: 'a\u009b2Jb\u009d52;c;eA==\u0007\u007f' };
    answer = envelope(200, data);
    const { status, stdout } = await run(['org', 'get', 'acme']);
    expect(status).toBe(0);
    // eslint-disable-next-line no-control-regex
    expect(stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(stdout).toContain('a\\u009b2Jb\\u009d52;c;eA==\\u0007\\u007f');
    expect(JSON.parse(stdout)).toEqual(data);
  });
});

describe('user create never takes a secret from the command line', () => {
  const PROMPTS = 'Password for alice (realm acme): \nRepeat the password: \n';

  it('asks twice at a terminal with echo off, and shows nothing of what was typed', async () => {
    const terminal = new FakeTerminal();
    const typedWhileEchoing: string[] = [];
    const echoOffAtPrompt: boolean[] = [];
    // Keys one by one, as a person types them: a typo fixed with backspace, an arrow key
    // (ignored), CRLF from a terminal that sends both.
    // Once the prompt's listener is there (it is attached right after the prompt shows).
    const type = (keys: string[]) =>
      setImmediate(() => {
        for (const key of keys) {
          if (!terminal.isRaw) typedWhileEchoing.push(key);
          terminal.write(key);
        }
      });
    const first = ['x', '\u007f', ...NEW_PASSWORD, '\u001b[D', '\r', '\n'];
    const { status, stdout, stderr } = await run(
      ['user', 'create', 'acme', 'alice', '--workspace', 'ws1'],
      BASIC_ENV,
      undefined,
      {
        stdin: terminal,
        onStderr: (text) => {
          if (text.endsWith(': ')) echoOffAtPrompt.push(terminal.isRaw);
          if (text.startsWith('Password for')) type(first);
          if (text.startsWith('Repeat')) type([...NEW_PASSWORD, '\r']);
        },
      },
    );
    expect({ status, stderr }).toEqual({ status: 0, stderr: PROMPTS });
    expect(stdout).toBe('{\n  "id": "x"\n}\n');
    // Echo is off before each prompt shows: a fast typist loses nothing to the terminal.
    expect(echoOffAtPrompt).toEqual([true, true]);
    expect(typedWhileEchoing).toEqual([]);
    expect(terminal.rawModes).toEqual([true, false]);
    expect(terminal.isPaused()).toBe(true);
    expect(recorded).toMatchObject([
      {
        url: '/api/platform/organizations/acme/users',
        body: { username: 'alice', password: NEW_PASSWORD, workspaces: ['ws1'] },
      },
    ]);
  });

  it('takes both answers from one pasted chunk', async () => {
    const terminal = new FakeTerminal();
    terminal.write(`${NEW_PASSWORD}\r${NEW_PASSWORD}\r`);
    const { status, stderr } = await createAliceAt(terminal);
    expect({ status, stderr }).toEqual({ status: 0, stderr: PROMPTS });
    expect(recorded[0]!.body).toEqual({ username: 'alice', password: NEW_PASSWORD });
  });

  it.each([
    ['Ctrl-C', `${NEW_PASSWORD}\u0003`, 'password prompt cancelled'],
    ['Ctrl-D on an empty line', '\u0004', 'password prompt cancelled'],
    ['an empty password', '\r\r', 'the password must not be empty'],
    ['two different answers', `${NEW_PASSWORD}\r${NEW_PASSWORD}x\r`, 'the two passwords differ'],
  ])('exits 2 without a request on %s, restoring the terminal', async (_, keys, message) => {
    const terminal = new FakeTerminal();
    terminal.write(keys);
    const { status, stdout, stderr } = await createAliceAt(terminal);
    expect(status).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain(`realmgate: ${message}\nUsage:\n  realmgate user create`);
    expect(terminal.rawModes).toEqual([true, false]);
    expect(recorded).toHaveLength(0);
  });

  it('exits 2 when the terminal closes before the password was typed', async () => {
    const terminal = new FakeTerminal();
    terminal.end('abc');
    const { status, stderr } = await createAliceAt(terminal);
    expect(status).toBe(2);
    expect(stderr).toContain('stdin closed before a password was typed');
    expect(stderr).not.toContain('abc');
    expect(terminal.rawModes).toEqual([true, false]);
  });

  it('checks the configuration before asking for a password', async () => {
    const terminal = new FakeTerminal();
    const { status, stderr } = await createAliceAt(terminal, {});
    expect(status).toBe(2);
    expect(stderr).toContain('no credentials');
    expect(stderr).not.toContain('Password for');
    expect(terminal.rawModes).toEqual([]);
  });

  it.each([
    [NEW_PASSWORD, NEW_PASSWORD],
    [`${NEW_PASSWORD}\n`, NEW_PASSWORD],
    [`${NEW_PASSWORD}\r\n`, NEW_PASSWORD],
    [` ${NEW_PASSWORD} \n`, ` ${NEW_PASSWORD} `],
  ])('--password-stdin reads %j as %j', async (input, password) => {
    const { status, stderr } = await run(
      ['user', 'create', 'master', 'root', '--password-stdin'],
      BASIC_ENV,
      undefined,
      { stdin: piped(input) },
    );
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
    expect(recorded[0]!.body).toEqual({ username: 'root', password });
  });

  it.each([
    ['', '--password-stdin: stdin holds no password'],
    ['\n', '--password-stdin: stdin holds no password'],
    ['\r\n', '--password-stdin: stdin holds no password'],
    [`${NEW_PASSWORD}\n\n`, '--password-stdin: stdin holds more than one line'],
    [`${NEW_PASSWORD}\nsecond`, '--password-stdin: stdin holds more than one line'],
    ['x'.repeat(8193), '--password-stdin: more than 8192 bytes on stdin'],
  ])('--password-stdin refuses %j with exit 2', async (input, message) => {
    const { status, stdout, stderr } = await run(
      ['user', 'create', 'master', 'root', '--password-stdin'],
      BASIC_ENV,
      undefined,
      { stdin: piped(input) },
    );
    expect({ status, stdout }).toEqual({ status: 2, stdout: '' });
    expect(stderr).toContain(`realmgate: ${message}\n`);
    expect(recorded).toHaveLength(0);
  });

  it('--password-stdin refuses bytes that are not UTF-8', async () => {
    const stdin = Readable.from([Buffer.from([0x70, 0xff, 0x0a])]);
    const { status, stderr } = await run(
      ['user', 'create', 'master', 'root', '--password-stdin'],
      BASIC_ENV,
      undefined,
      { stdin },
    );
    expect(status).toBe(2);
    expect(stderr).toContain('--password-stdin: stdin is not UTF-8 text');
  });

  it('without a terminal and without --password-stdin, says how to pass the password', async () => {
    const { status, stderr } = await run(
      ['user', 'create', 'acme', 'alice'],
      BASIC_ENV,
      undefined,
      {
        stdin: piped(`${NEW_PASSWORD}\n`),
      },
    );
    expect(status).toBe(2);
    expect(stderr).toContain(
      'realmgate: no terminal to ask for the password: pipe it in with --password-stdin, e.g. printf \'%s\\n\' "$PASSWORD" | realmgate user create|passwd ... --password-stdin\n',
    );
    expect(recorded).toHaveLength(0);
  });

  it('--password-stdin at a terminal is refused, as the password would be echoed', async () => {
    const terminal = new FakeTerminal();
    const { status, stderr } = await run(
      ['user', 'create', 'acme', 'alice', '--password-stdin'],
      BASIC_ENV,
      undefined,
      { stdin: terminal },
    );
    expect(status).toBe(2);
    expect(stderr).toContain('--password-stdin reads a pipe or a file, but stdin is a terminal');
    expect(terminal.rawModes).toEqual([]);
    expect(recorded).toHaveLength(0);
  });

  it.each([
    [['--password', NEW_PASSWORD], '--password is refused'],
    [[`--password=${NEW_PASSWORD}`], '--password is refused'],
    [['--otp-secret', 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP'], '--otp-secret is refused'],
  ])('refuses %j with exit 2, without echoing the value', async (options, message) => {
    const { status, stdout, stderr } = await run(
      ['user', 'create', 'acme', 'alice', '--password-stdin', ...options],
      BASIC_ENV,
      undefined,
      { stdin: piped(NEW_PASSWORD) },
    );
    expect({ status, stdout }).toEqual({ status: 2, stdout: '' });
    expect(stderr).toContain(
      `realmgate: ${message}: secrets are never taken from the command line`,
    );
    expect(stderr).not.toContain('JBSWY3DPEHPK3PXP');
    expect(recorded).toHaveLength(0);
  });

  it('--otp sends a fresh 160-bit base32 secret and prints it once with its otpauth URI', async () => {
    answer = envelope(200, { id: 'u1', username: 'alice', realm: 'acme', workspaces: [] });
    const argv = ['user', 'create', 'acme', 'alice', '--password-stdin', '--otp'];
    const { status, stdout, stderr } = await run(argv, BASIC_ENV, undefined, {
      stdin: piped(NEW_PASSWORD),
    });
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
    const secret = (recorded[0]!.body as { otp_secret: string }).otp_secret;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(recorded[0]!.body).toEqual({
      username: 'alice',
      password: NEW_PASSWORD,
      otp_secret: secret,
    });
    expect(JSON.parse(stdout)).toEqual({
      id: 'u1',
      username: 'alice',
      realm: 'acme',
      workspaces: [],
      otp_secret: secret,
      otpauth_uri: `otpauth://totp/realmgate:alice?secret=${secret}&issuer=realmgate`,
    });
    expect(stdout.split(secret)).toHaveLength(3); // once as the secret, once in the URI
    const again = await run(argv, BASIC_ENV, undefined, { stdin: piped(NEW_PASSWORD) });
    expect(again.status).toBe(0);
    expect((recorded[1]!.body as { otp_secret: string }).otp_secret).not.toBe(secret);
  });

  it('--otp still prints the secret if the answer is not an object', async () => {
    answer = envelope(200, null);
    const { status, stdout } = await run(
      ['user', 'create', 'acme', 'alice', '--password-stdin', '--otp'],
      BASIC_ENV,
      undefined,
      { stdin: piped(NEW_PASSWORD) },
    );
    expect(status).toBe(0);
    const secret = (recorded[0]!.body as { otp_secret: string }).otp_secret;
    expect(JSON.parse(stdout)).toEqual({
      data: null,
      otp_secret: secret,
      otpauth_uri: `otpauth://totp/realmgate:alice?secret=${secret}&issuer=realmgate`,
    });
  });
});

/** `user create acme alice` with its password typed at `terminal`. */
function createAliceAt(terminal: FakeTerminal, env: Record<string, string> = BASIC_ENV) {
  return run(['user', 'create', 'acme', 'alice'], env, undefined, { stdin: terminal });
}

async function runWithoutGateway(argv: string[], env: Record<string, string> = {}) {
  const { io, output } = capturingIo(Readable.from([]));
  const status = await runCli(argv, env, io);
  return { status, ...output };
}

describe('runCli exit statuses without a gateway', () => {
  it('prints help on stdout and exits 0', async () => {
    const { status, stdout, stderr } = await runWithoutGateway(['help']);
    expect(status).toBe(0);
    expect(stdout).toContain('Usage: realmgate <command>');
    expect(stderr).toBe('');
  });

  it('prints the version', async () => {
    const { status, stdout } = await runWithoutGateway(['--version']);
    expect(status).toBe(0);
    // The root package.json's: the gateway's and the CLI's one version.
    expect(stdout).toBe(`${VERSION}\n`);
  });

  it('exits 2 with the message and a short usage on a usage error', async () => {
    const { status, stdout, stderr } = await runWithoutGateway(['lifetimes', 'set', 'master']);
    expect(status).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/^realmgate: lifetimes set needs at least one option\nUsage:\n/);
    expect(stderr).toContain('realmgate lifetimes set <realm>');
    expect(stderr).not.toContain('realmgate org create');
  });

  it.each([
    [{}, 'no credentials: set REALMGATE_TOKEN, or REALMGATE_USERNAME and REALMGATE_PASSWORD'],
    [{ REALMGATE_USERNAME: 'admin' }, 'REALMGATE_PASSWORD is not set'],
    [{ REALMGATE_PASSWORD: 'pw' }, 'REALMGATE_USERNAME is not set'],
    [{ REALMGATE_TOKEN: 't', REALMGATE_USERNAME: 'admin' }, 'not both'],
    [{ REALMGATE_TOKEN: 'two words' }, 'REALMGATE_TOKEN is malformed'],
    [{ REALMGATE_USERNAME: 'a:b', REALMGATE_PASSWORD: 'pw' }, 'REALMGATE_USERNAME contains ":"'],
    [{ REALMGATE_TOKEN: 't', REALMGATE_URL: 'ftp://gw' }, 'REALMGATE_URL must start with http'],
    [
      { REALMGATE_TOKEN: 't', REALMGATE_URL: 'http://u:pw@gw' },
      'REALMGATE_URL must not hold credentials',
    ],
    [{ REALMGATE_TOKEN: 't', REALMGATE_URL: 'not a url' }, 'REALMGATE_URL is not an absolute URL'],
  ])('exits 2 on a configuration problem %j', async (env, message) => {
    const { status, stderr } = await runWithoutGateway(['lifetimes', 'show', 'master'], env);
    expect(status).toBe(2);
    expect(stderr).toContain(message);
    expect(stderr).not.toContain('pw');
  });
});

describe('a credentials directory that cannot be written', () => {
  it('login exits 2 naming the directory, before any password grant, without a stack trace', async () => {
    const bin = fileURLToPath(new URL('../../../bin/realmgate.js', import.meta.url));
    // Root writes through any mode bits; sysfs refuses a new directory to everyone (EPERM),
    // while reading a file there only finds none.
    const configDir = '/sys/realmgate-credentials';
    recorded = [];
    const { code, stdout, stderr } = await new Promise<{
      code: number;
      stdout: string;
      stderr: string;
    }>((resolve) => {
      const child = execFile(
        process.execPath,
        [bin, 'login', 'acme', 'alice', '--password-stdin', '--no-dpop'],
        {
          env: { ...process.env, REALMGATE_URL: baseUrl, REALMGATE_CONFIG_DIR: configDir },
          timeout: 30_000,
        },
        (error, out, err) =>
          resolve({ code: error ? Number(error.code) : 0, stdout: out, stderr: err }),
      );
      child.stdin!.end(`${PASSWORD}\n`);
    });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toMatch(
      /^realmgate: cannot write the credentials in \/sys\/realmgate-credentials/,
    );
    expect(stderr).not.toMatch(/\n\s+at /);
    expect(stderr).not.toContain(PASSWORD);
    expect(recorded.filter((request) => request.url.includes('/token'))).toEqual([]);
  }, 30_000);
});
