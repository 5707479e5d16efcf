import { execFile } from 'node:child_process';
import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';

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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  recorded = [];
  answer = envelope(200, { id: 'x' });
});

async function run(argv: string[], env: Record<string, string> = BASIC_ENV, timeoutMs?: number) {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
  };
  const status = await runCli(argv, { REALMGATE_URL: baseUrl, ...env }, io, { timeoutMs });
  for (const secret of [
    PASSWORD,
    TOKEN,
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
      ['user', 'create', 'master', 'root', '--password', 'pw1'],
      'POST',
      '/api/platform/users',
      { username: 'root', password: 'pw1' },
    ],
    [
      [
        'user',
        'create',
        'acme',
        'alice',
        '--password',
        'pw2',
        '--workspace',
        'ws1',
        '--workspace',
        'ws2',
        '--otp-secret',
        'JBSWY3DPEHPK3PXP',
      ],
      'POST',
      '/api/platform/organizations/acme/users',
      {
        username: 'alice',
        password: 'pw2',
        workspaces: ['ws1', 'ws2'],
        otp_secret: 'JBSWY3DPEHPK3PXP',
      },
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
    const { status, stdout, stderr } = await run(argv);
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
    [503, '503-11001', 'The identity provider is unavailable; retry later.'],
  ])('reports an API error %i %s on stderr and exits 1', async (httpStatus, result, message) => {
    answer = envelope(httpStatus, null, result, message);
    const { status, stdout, stderr } = await run(['workspace', 'create', 'acme', 'ws1']);
    expect(status).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toBe(`error ${httpStatus} ${result}: ${message}\n`);
  });

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
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const { status, stderr } = await run(['org', 'create', 'acme'], {
      ...BASIC_ENV,
      REALMGATE_URL: `http://127.0.0.1:${port}`,
    });
    expect(status).toBe(3);
    expect(stderr).toBe(
      `realmgate: cannot reach the gateway at http://127.0.0.1:${port}/ (ECONNREFUSED); is it running? REALMGATE_URL selects another address\n`,
    );
  });

  it('exits 3 when the gateway does not answer in time', async () => {
    answer = () => {}; // never answers
    const { status, stderr } = await run(['lifetimes', 'show', 'master'], BASIC_ENV, 200);
    expect(status).toBe(3);
    expect(stderr).toBe(`realmgate: no answer from ${baseUrl}/ within 0.2 s\n`);
  });

  it('prints help without credentials or requests', async () => {
    const { status, stdout } = await run(['user', 'create', '--help'], {});
    expect(status).toBe(0);
    expect(stdout).toContain('realmgate user create <realm> <username> --password <pw>');
    expect(stdout).not.toContain('realmgate org create');
    const full = await run(['--help'], {});
    for (const command of [
      'org create',
      'workspace create',
      'user create',
      'operation add',
      'lifetimes show',
      'lifetimes set',
    ]) {
      expect(full.stdout).toContain(`realmgate ${command} `);
    }
    expect(full.stdout).toContain('REALMGATE_URL');
    expect(recorded).toHaveLength(0);
  });

  it('runs as `node bin/realmgate.js --help`', async () => {
    const bin = fileURLToPath(new URL('../../bin/realmgate.js', import.meta.url));
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [bin, '--help'], {
      timeout: 30_000,
    });
    expect(stdout).toContain('Usage: realmgate <command> [options]');
    expect(stderr).toBe('');
  }, 30_000);
});
