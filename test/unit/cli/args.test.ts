import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { CliError } from '../../../src/cli/errors.ts';
import { runCli } from '../../../src/cli/main.ts';
import { capturingIo } from '../../helpers/cli-io.ts';

function usageErrorOf(argv: string[]): CliError {
  try {
    parseCommandLine(argv);
  } catch (error) {
    if (error instanceof CliError) return error;
    throw error;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
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
        '--dpop-required',
        'true',
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
        dpop_bound_access_tokens: true,
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
    expect(usageErrorOf(['org', 'create', '--', '-h']).message).toContain(
      'invalid <org>: an organization id is a lowercase letter',
    );
  });

  it.each([
    [[], 'missing command', undefined],
    [['frobnicate'], 'unknown command: the usage below lists the commands', undefined],
    [['org'], 'missing org command', 'org'],
    [['org', 'rename', 'acme'], 'unknown org command: the usage below lists them', 'org'],
    [['org', 'create'], 'missing <org>', 'org'],
    [['org', 'create', 'acme', 'extra'], 'too many arguments', 'org'],
    [['org', 'create', 'Acme'], 'invalid <org>: an organization id', 'org'],
    [['org', 'create', 'master'], 'and not master, platform, admin, auth, api', 'org'],
    [['org', 'create', 'acme', '--name', 'a', '--name', 'b'], '--name given more than once', 'org'],
    [['org', 'create', 'acme', '--name', ''], '--name must not be empty', 'org'],
    [['org', 'create', 'acme', '--name'], "Option '--name <value>' argument missing", 'org'],
    [['org', 'create', 'acme', '--nmae', 'x'], "Unknown option '--nmae'", 'org'],
    [['workspace', 'create', 'acme', 'w s'], 'invalid <ws>: a workspace id', 'workspace'],
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
    [['user', 'create', 'Bad', 'bob'], 'invalid <realm>: master or an organization', 'user'],
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

describe('a refused word on the command line', () => {
  // Refused by every rule below: a password pasted in the wrong place, say.
  const misplaced = 'S3cret!pass';

  it.each([
    [['org', 'get', misplaced], 'invalid <org>: an organization id is a lowercase letter'],
    [['user', 'grant', 'acme', 'bob', misplaced], 'invalid <ws>: a workspace id is a letter'],
    [['user', 'list', misplaced], 'invalid <realm>: master or an organization id'],
    [['login', misplaced, 'alice'], 'invalid <realm>: master or an organization id'],
    [['tokens', 'list', '--realm', misplaced], 'invalid --realm: master or an organization id'],
    [
      ['user', 'create', 'acme', 'bob', '--workspace', misplaced, '--password-stdin'],
      'invalid --workspace: a workspace id is a letter',
    ],
    [[misplaced], 'unknown command: the usage below lists the commands'],
    [[misplaced, 'create'], 'unknown command: the usage below lists the commands'],
    [['org', misplaced], 'unknown org command: the usage below lists them'],
  ])('%j is not echoed; the error names the argument and its rule', async (argv, said) => {
    const { io, output } = capturingIo();
    expect(await runCli(argv, {}, io)).toBe(2);
    expect(output.stderr).toContain(said);
    expect(output.stderr).not.toContain(misplaced);
  });
});
