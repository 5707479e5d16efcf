import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../src/cli/args.ts';
import { CliError } from '../../src/cli/errors.ts';
import { runCli } from '../../src/cli/main.ts';
import { createOtpEnrollment, encodeBase32 } from '../../src/cli/otp.ts';
import { parseDuration, parseFlag, parseTimestamp } from '../../src/cli/values.ts';
import { capturingIo } from '../helpers/cli-io.ts';

function usageErrorOf(argv: string[]): CliError {
  try {
    parseCommandLine(argv);
  } catch (error) {
    if (error instanceof CliError) return error;
    throw error;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

async function run(argv: string[], env: Record<string, string> = {}) {
  const { io, output } = capturingIo(Readable.from([]));
  const status = await runCli(argv, env, io);
  return { status, ...output };
}

describe('parseCommandLine', () => {
  it('parses every command', () => {
    expect(parseCommandLine(['org', 'create', 'acme'])).toEqual({
      name: 'org create',
      org: 'acme',
      displayName: 'acme',
    });
    expect(parseCommandLine(['org', 'create', 'acme', '--name', 'ACME Inc.'])).toMatchObject({
      displayName: 'ACME Inc.',
    });
    expect(
      parseCommandLine([
        'workspace',
        'create',
        'acme',
        'Ws1',
        '--environment',
        'dev',
        '--description=Main',
        '--environment',
        'prod',
      ]),
    ).toEqual({
      name: 'workspace create',
      org: 'acme',
      workspace: 'Ws1',
      displayName: 'Ws1',
      description: 'Main',
      environments: ['dev', 'prod'],
    });
    expect(
      parseCommandLine([
        'user',
        'create',
        'acme',
        'alice',
        '--password-stdin',
        '--workspace',
        'ws1',
        '--otp',
      ]),
    ).toEqual({
      name: 'user create',
      realm: 'acme',
      username: 'alice',
      passwordFrom: 'stdin',
      workspaces: ['ws1'],
      otp: true,
    });
    expect(parseCommandLine(['user', 'create', 'master', 'root'])).toEqual({
      name: 'user create',
      realm: 'master',
      username: 'root',
      passwordFrom: 'prompt',
      workspaces: [],
      otp: false,
    });
    expect(
      parseCommandLine([
        'operation',
        'add',
        'acme',
        'ws1',
        '--name',
        'nightly',
        '--scheduled',
        '2026-05-01T10:00+09:00',
        '--remarks',
        'r',
      ]),
    ).toEqual({
      name: 'operation add',
      org: 'acme',
      workspace: 'ws1',
      operationName: 'nightly',
      scheduled: '2026-05-01T01:00:00.000Z',
      remarks: 'r',
      environment: undefined,
    });
    expect(parseCommandLine(['lifetimes', 'show', 'master'])).toEqual({
      name: 'lifetimes show',
      realm: 'master',
    });
    expect(
      parseCommandLine([
        'lifetimes',
        'set',
        'acme',
        '--access',
        '1d',
        '--client-idle',
        '2h',
        '--client-max=90m',
        '--offline-idle',
        '365d',
        '--offline-max',
        '3600',
        '--offline-max-enabled',
        'false',
      ]),
    ).toEqual({
      name: 'lifetimes set',
      realm: 'acme',
      lifetimes: {
        access_token_lifespan: 86_400,
        client_session_idle_timeout: 7200,
        client_session_max_lifespan: 5400,
        offline_session_idle_timeout: 31_536_000,
        offline_session_max_lifespan: 3600,
        offline_session_max_lifespan_enabled: false,
      },
    });
  });

  it('answers help for --help or -h anywhere, help [group], and --version', () => {
    expect(parseCommandLine(['help'])).toEqual({ name: 'help', group: undefined });
    expect(parseCommandLine(['help', 'user'])).toEqual({ name: 'help', group: 'user' });
    expect(parseCommandLine(['user', 'create', '--bogus', '-h'])).toEqual({
      name: 'help',
      group: 'user',
    });
    expect(parseCommandLine(['--help', 'org'])).toEqual({ name: 'help', group: undefined });
    expect(parseCommandLine(['--version'])).toEqual({ name: 'version' });
    // After `--` a "-h" is an argument, not a request for help.
    expect(usageErrorOf(['org', 'create', '--', '-h']).message).toBe(
      "invalid organization id '-h'",
    );
  });

  it.each([
    [[], 'missing command', undefined],
    [['frobnicate'], "unknown command 'frobnicate'", undefined],
    [['org'], 'missing org command', 'org'],
    [['org', 'rename', 'acme'], "unknown command 'org rename'", 'org'],
    [['org', 'create'], 'missing <org>', 'org'],
    [['org', 'create', 'acme', 'extra'], 'too many arguments', 'org'],
    [['org', 'create', 'Acme'], "invalid organization id 'Acme'", 'org'],
    [['org', 'create', 'master'], "invalid organization id 'master'", 'org'],
    [['org', 'create', 'acme', '--name', 'a', '--name', 'b'], '--name given more than once', 'org'],
    [['org', 'create', 'acme', '--name', ''], '--name must not be empty', 'org'],
    [['org', 'create', 'acme', '--name'], "Option '--name <value>' argument missing", 'org'],
    [['org', 'create', 'acme', '--nmae', 'x'], "Unknown option '--nmae'", 'org'],
    [['workspace', 'create', 'acme', 'w s'], "invalid workspace id 'w s'", 'workspace'],
    [
      ['user', 'create', 'acme', 'bob', '--password', 'p'],
      '--password is refused: secrets are never taken from the command line, where ps and ' +
        'shell history see them; type it at the prompt (no echo), or pipe it in with ' +
        '--password-stdin',
      'user',
    ],
    [['user', 'create', 'acme', 'bob', '--password=p'], '--password is refused', 'user'],
    [['user', 'create', 'acme', 'bob', '--password'], '--password is refused', 'user'],
    [
      ['user', 'create', 'acme', 'bob', '--otp-secret', 'JBSWY3DPEHPK3PXP'],
      '--otp-secret is refused: secrets are never taken from the command line, where ps and ' +
        'shell history see them; use --otp to have a fresh secret generated and printed once',
      'user',
    ],
    [['user', 'create', 'acme', 'bob', '--otp-secret=JBSW'], '--otp-secret is refused', 'user'],
    // Refused whichever command it was given to, and before the command is even looked at.
    [['org', 'create', 'acme', '--password', 'p'], '--password is refused', 'org'],
    [['--password', 'p', 'user', 'create'], '--password is refused', undefined],
    [['user', 'create', 'acme', 'bob', '--otp=yes'], "Option '--otp' does not take", 'user'],
    [
      ['user', 'create', 'acme', 'bob', '--password-stdin=x'],
      "Option '--password-stdin' does not take",
      'user',
    ],
    [
      ['user', 'create', 'master', 'bob', '--workspace', 'w'],
      '--workspace applies to organization users',
      'user',
    ],
    [['user', 'create', 'Bad', 'bob'], "invalid realm 'Bad'", 'user'],
    [['operation', 'add', 'acme', 'ws1'], '--name is required', 'operation'],
    [
      ['operation', 'add', 'acme', 'ws1', '--name', 'n', '--scheduled', '2026-05-01T10:00'],
      '--scheduled: expected an ISO date',
      'operation',
    ],
    [['lifetimes', 'set', 'master'], 'lifetimes set needs at least one option', 'lifetimes'],
    [
      ['lifetimes', 'set', 'master', '--access', '1w'],
      '--access: expected a duration',
      'lifetimes',
    ],
    [
      ['lifetimes', 'set', 'master', '--offline-max-enabled', 'yes'],
      '--offline-max-enabled: expected true or false',
      'lifetimes',
    ],
    [['--name', 'x', 'org', 'create', 'acme'], 'options go after the command', undefined],
  ])('refuses %j: %s', (argv, message, group) => {
    const error = usageErrorOf(argv);
    expect(error.kind).toBe('usage');
    expect(error.exitCode).toBe(2);
    expect(error.message).toContain(message);
    expect(error.group).toBe(group);
  });

  it('never echoes a password or secret in a usage error', () => {
    const secret = 'S3cret-Value';
    for (const argv of [
      ['user', 'create', 'acme', 'bob', secret, '--password-stdin'],
      ['user', 'create', 'acme', 'bob', `--pasword=${secret}`],
      [`--password=${secret}`, 'user', 'create'],
      ['user', 'create', 'acme', 'bob', '--password', secret],
      ['user', 'create', 'acme', 'bob', `--password=${secret}`],
      ['user', 'create', 'acme', 'bob', '--password', `-${secret}`],
      ['user', 'create', 'acme', 'bob', '--otp-secret', secret],
      ['user', 'create', 'acme', 'bob', `--otp-secret=${secret}`],
    ]) {
      expect(usageErrorOf(argv).message).not.toContain(secret);
    }
  });
});

describe('values', () => {
  it.each([
    ['1', 1],
    ['3600', 3600],
    ['45s', 45],
    ['15m', 900],
    ['1h', 3600],
    ['1d', 86_400],
    ['365d', 31_536_000],
    ['24855d', 2_147_472_000],
  ])('reads duration %s as %i seconds', (text, seconds) => {
    expect(parseDuration(text, '--access')).toBe(seconds);
  });

  it.each(['', '0', '0d', '-1', '1.5h', '1w', '1 d', ' 1d', '1D', 'd', '24856d', '99999999999'])(
    'refuses duration %j',
    (text) => {
      expect(() => parseDuration(text, '--access')).toThrow(/--access/);
    },
  );

  it('reads flags strictly', () => {
    expect(parseFlag('true', '--x')).toBe(true);
    expect(parseFlag('false', '--x')).toBe(false);
    for (const text of ['TRUE', '1', 'yes', 'on', ''])
      expect(() => parseFlag(text, '--x')).toThrow();
  });

  it('reads ISO dates and zoned date-times into UTC, refusing impossible ones', () => {
    expect(parseTimestamp('2026-05-01', '--s')).toBe('2026-05-01T00:00:00.000Z');
    expect(parseTimestamp('2026-05-01T10:00:30.5Z', '--s')).toBe('2026-05-01T10:00:30.500Z');
    expect(parseTimestamp('2026-05-01 10:00-02:00', '--s')).toBe('2026-05-01T12:00:00.000Z');
    expect(parseTimestamp('2024-02-29', '--s')).toBe('2024-02-29T00:00:00.000Z');
    for (const text of [
      '2026-02-30',
      '2026-13-01',
      '2026-05-01T24:00Z',
      '2026-05-01T10:00',
      'tomorrow',
      '1714557600',
    ]) {
      expect(() => parseTimestamp(text, '--s'), text).toThrow(/--s/);
    }
  });
});

describe('otp', () => {
  it.each([
    ['', ''],
    ['f', 'MY'],
    ['fo', 'MZXQ'],
    ['foo', 'MZXW6'],
    ['foob', 'MZXW6YQ'],
    ['fooba', 'MZXW6YTB'],
    ['foobar', 'MZXW6YTBOI'],
  ])('encodes %j as RFC 4648 base32 %j without padding', (text, base32) => {
    expect(encodeBase32(Buffer.from(text))).toBe(base32);
  });

  it('encodes every bit', () => {
    expect(encodeBase32(Buffer.alloc(20, 0xff))).toBe('7'.repeat(32));
    expect(encodeBase32(Buffer.alloc(20))).toBe('A'.repeat(32));
  });

  it('generates a fresh 160-bit secret and its otpauth URI', () => {
    const first = createOtpEnrollment('alice@example.com');
    const second = createOtpEnrollment('alice@example.com');
    expect(first.secret).toMatch(/^[A-Z2-7]{32}$/); // 32 x 5 bits
    expect(second.secret).not.toBe(first.secret);
    expect(first.uri).toBe(
      `otpauth://totp/realmgate:alice%40example.com?secret=${first.secret}&issuer=realmgate`,
    );
  });
});

describe('runCli exit statuses without a gateway', () => {
  it('prints help on stdout and exits 0', async () => {
    const { status, stdout, stderr } = await run(['help']);
    expect(status).toBe(0);
    expect(stdout).toContain('Usage: realmgate <command>');
    expect(stderr).toBe('');
  });

  it('prints the version', async () => {
    const { status, stdout } = await run(['--version']);
    expect(status).toBe(0);
    expect(stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
  });

  it('exits 2 with the message and a short usage on a usage error', async () => {
    const { status, stdout, stderr } = await run(['lifetimes', 'set', 'master']);
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
    const { status, stderr } = await run(['lifetimes', 'show', 'master'], env);
    expect(status).toBe(2);
    expect(stderr).toContain(message);
    expect(stderr).not.toContain('pw');
  });
});
