import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { buildRequest } from '../../../src/cli/commands.ts';
import { formatHelp } from '../../../src/cli/help.ts';
import { CliError } from '../../../src/cli/errors.ts';

function usageErrorOf(argv: string[]): string {
  try {
    parseCommandLine(argv);
  } catch (error) {
    if (error instanceof CliError && error.kind === 'usage') return error.message;
    throw error;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

const requestOf = (argv: string[], extra: Record<string, unknown> = {}) =>
  buildRequest({ ...parseCommandLine(argv), ...extra });

describe('realmgate user lifecycle commands', () => {
  it('parses list with its paging options and maps it onto the query', () => {
    expect(parseCommandLine(['user', 'list', 'acme'])).toEqual({
      name: 'user list',
      realm: 'acme',
    });
    const argv = ['user', 'list', 'master', '--first', '200', '--max=50', '--search', 'a b'];
    expect(parseCommandLine(argv)).toEqual({
      name: 'user list',
      realm: 'master',
      first: 200,
      max: 50,
      search: 'a b',
    });
    expect(requestOf(argv)).toEqual({
      method: 'GET',
      path: '/api/platform/users?first=200&max=50&search=a+b',
    });
    expect(requestOf(['user', 'list', 'acme'])).toEqual({
      method: 'GET',
      path: '/api/platform/organizations/acme/users',
    });
  });

  it.each([
    [['user', 'list', 'acme', '--max', '0'], '--max must be a whole number from 1 to 1000'],
    [['user', 'list', 'acme', '--max', '1001'], '--max must be a whole number from 1 to 1000'],
    [['user', 'list', 'acme', '--first=-1'], '--first must be a whole number'],
    [['user', 'list', 'acme', '--first', '1e3'], '--first must be a whole number'],
    [['user', 'list', 'Bad!'], 'invalid <realm>: master or an organization id'],
    [['user', 'get', 'acme'], 'missing <username>'],
    [['user', 'disable', 'acme', 'bob', 'extra'], 'too many arguments'],
    [['user', 'grant', 'acme', 'bob'], 'missing <ws>'],
    [['user', 'grant', 'master', 'bob', 'ws1'], 'invalid <org>: an organization id'],
    [['user', 'revoke', 'acme', 'bob', 'bad ws'], 'invalid <ws>: a workspace id'],
    [['user', 'passwd', 'acme', 'bob', '--password', 'x'], '--password is refused'],
    [['user', 'passwd', 'acme', 'bob', '--password=hunter2'], '--password is refused'],
  ])('refuses %j', (argv, message) => {
    const error = usageErrorOf(argv);
    expect(error).toContain(message);
    expect(error).not.toContain('hunter2');
  });

  it.each([
    ['get', 'acme', 'a/b?c', 'GET', '/api/platform/organizations/acme/users/a%2Fb%3Fc'],
    ['disable', 'master', 'bob', 'POST', '/api/platform/users/bob/disable'],
    ['enable', 'acme', 'bob', 'POST', '/api/platform/organizations/acme/users/bob/enable'],
    ['delete', 'acme', 'bob', 'DELETE', '/api/platform/organizations/acme/users/bob'],
  ])(
    'maps %s (%s, %s), encoding the username as one segment',
    (command, realm, username, method, path) => {
      expect(requestOf(['user', command, realm, username])).toEqual({ method, path });
    },
  );

  it('parses passwd without a password and sends the one read later', () => {
    expect(parseCommandLine(['user', 'passwd', 'acme', 'bob'])).toEqual({
      name: 'user passwd',
      realm: 'acme',
      username: 'bob',
      passwordFrom: 'prompt',
    });
    const argv = ['user', 'passwd', 'acme', 'bob', '--password-stdin'];
    expect(parseCommandLine(argv)).toMatchObject({ passwordFrom: 'stdin' });
    expect(requestOf(argv, { password: 'pw' })).toEqual({
      method: 'PUT',
      path: '/api/platform/organizations/acme/users/bob/password',
      body: { password: 'pw' },
    });
  });

  it('maps grant and revoke onto PUT and DELETE of the workspace role', () => {
    const path = '/api/platform/organizations/acme/users/bob/workspaces/Ws1';
    expect(requestOf(['user', 'grant', 'acme', 'bob', 'Ws1'])).toEqual({ method: 'PUT', path });
    expect(requestOf(['user', 'revoke', 'acme', 'bob', 'Ws1'])).toEqual({ method: 'DELETE', path });
  });

  it('lists every command in the help', () => {
    const help = formatHelp();
    for (const verb of ['list', 'get|disable|enable|delete', 'passwd', 'grant|revoke']) {
      expect(help).toContain(`realmgate user ${verb} `);
    }
  });
});
