import { createServer, type Server } from 'node:http';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { CliError } from '../../../src/cli/errors.ts';
import type { CliIo } from '../../../src/cli/io.ts';
import { runCli } from '../../../src/cli/main.ts';
import { capturingIo, piped } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

function usageErrorOf(argv: string[]): CliError {
  try {
    parseCommandLine(argv);
  } catch (error) {
    if (error instanceof CliError && error.kind === 'usage') return error;
    throw error;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
}

describe('parseCommandLine: organization and workspace lifecycle', () => {
  it('parses every command', () => {
    expect(parseCommandLine(['org', 'list'])).toEqual({ name: 'org list' });
    expect(parseCommandLine(['org', 'get', 'acme'])).toEqual({ name: 'org get', org: 'acme' });
    expect(parseCommandLine(['org', 'delete', 'acme'])).toEqual({
      name: 'org delete',
      org: 'acme',
      confirmed: false,
    });
    expect(parseCommandLine(['org', 'delete', 'acme', '--yes'])).toMatchObject({
      confirmed: true,
    });
    expect(parseCommandLine(['org', 'disable', 'acme'])).toEqual({
      name: 'org disable',
      org: 'acme',
    });
    expect(parseCommandLine(['org', 'enable', 'acme'])).toEqual({
      name: 'org enable',
      org: 'acme',
    });
    expect(parseCommandLine(['workspace', 'list', 'acme'])).toEqual({
      name: 'workspace list',
      org: 'acme',
    });
    expect(parseCommandLine(['workspace', 'delete', 'acme', 'Ws1'])).toEqual({
      name: 'workspace delete',
      org: 'acme',
      workspace: 'Ws1',
    });
  });

  it('refuses missing, extra and malformed arguments with the group usage', () => {
    expect(usageErrorOf(['org', 'get'])).toMatchObject({ message: 'missing <org>', group: 'org' });
    expect(usageErrorOf(['org', 'list', 'acme'])).toMatchObject({ message: 'too many arguments' });
    expect(usageErrorOf(['org', 'delete', 'acme', '--yes=no']).group).toBe('org');
    expect(usageErrorOf(['org', 'disable', 'Not-An-Org']).message).toContain('organization');
    expect(usageErrorOf(['workspace', 'delete', 'acme'])).toMatchObject({
      message: 'missing <ws>',
      group: 'workspace',
    });
    expect(usageErrorOf(['workspace', 'delete', 'acme', '-ws']).group).toBe('workspace');
    expect(usageErrorOf(['org', 'purge', 'acme']).message).toBe(
      'unknown org command: the usage below lists them',
    );
  });

  it('lists the commands in the help and in the group help', async () => {
    const all = capturingIo(Readable.from([]));
    expect(await runCli(['--help'], {}, all.io)).toBe(0);
    const group = capturingIo(Readable.from([]));
    expect(await runCli(['org', '--help'], {}, group.io)).toBe(0);
    for (const line of ['org list', 'org get <org>', 'org delete <org> [--yes]', 'org enable']) {
      expect(all.output.stdout).toContain(`realmgate ${line}`);
      expect(group.output.stdout).toContain(`realmgate ${line}`);
    }
    expect(all.output.stdout).toContain('realmgate workspace delete <org> <ws>');
    expect(group.output.stdout).not.toContain('workspace list');
  });
});

/** A terminal on stdin: the test types into it. */
class FakeTerminal extends PassThrough {
  readonly isTTY = true;
}

describe('realmgate org/workspace lifecycle against a stand-in API', () => {
  let server: Server;
  let baseUrl: string;
  let recorded: { method: string; url: string }[];
  const env = () => ({ REALMGATE_URL: baseUrl, REALMGATE_USERNAME: 'a', REALMGATE_PASSWORD: 'b' });

  beforeAll(async () => {
    server = createServer((req, res) => {
      recorded.push({ method: req.method!, url: req.url! });
      res.writeHead(200, { 'content-type': 'application/json' });
      const body = { data: { id: 'acme' }, message: 'SUCCESS', result: '000-00000', ts: '' };
      res.end(JSON.stringify(body));
    });
    baseUrl = await listenLocally(server);
  });
  afterAll(async () => {
    await closeServers(server);
  });
  beforeEach(() => {
    recorded = [];
  });

  async function run(
    argv: string[],
    stdin: CliIo['stdin'] = piped(''),
    onStderr?: (t: string) => void,
  ) {
    const { io, output } = capturingIo(stdin, onStderr);
    const status = await runCli(argv, env(), io);
    return { status, ...output };
  }

  it.each([
    [['org', 'list'], 'GET', '/api/platform/organizations'],
    [['org', 'get', 'acme'], 'GET', '/api/platform/organizations/acme'],
    [['org', 'delete', 'acme', '--yes'], 'DELETE', '/api/platform/organizations/acme?confirm=acme'],
    [['org', 'disable', 'acme'], 'POST', '/api/platform/organizations/acme/disable'],
    [['org', 'enable', 'acme'], 'POST', '/api/platform/organizations/acme/enable'],
    [['workspace', 'list', 'acme'], 'GET', '/api/platform/organizations/acme/workspaces'],
    [
      ['workspace', 'delete', 'acme', 'ws1'],
      'DELETE',
      '/api/platform/organizations/acme/workspaces/ws1',
    ],
  ])('%j sends %s %s and prints the data', async (argv, method, url) => {
    const result = await run(argv);
    expect(result).toMatchObject({ status: 0, stderr: '' });
    expect(JSON.parse(result.stdout)).toEqual({ id: 'acme' });
    expect(recorded).toEqual([{ method, url }]);
  });

  it('org delete without --yes and without a terminal deletes nothing (exit 2)', async () => {
    const result = await run(['org', 'delete', 'acme'], piped('acme\n'));
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--yes');
    expect(recorded).toEqual([]);
  });

  it('org delete at a terminal deletes after the id is typed again', async () => {
    const terminal = new FakeTerminal();
    const result = await run(['org', 'delete', 'acme'], terminal, (text) => {
      if (text.includes('Type the organization id')) terminal.write('acme\n');
    });
    expect(result.status).toBe(0);
    expect(result.stderr).toContain('This deletes organization acme');
    expect(recorded).toEqual([
      { method: 'DELETE', url: '/api/platform/organizations/acme?confirm=acme' },
    ]);
  });

  it('org delete at a terminal deletes nothing when another id is typed, or none', async () => {
    const terminal = new FakeTerminal();
    const wrong = await run(['org', 'delete', 'acme'], terminal, (text) => {
      if (text.includes('Type the organization id')) terminal.write('acne\n');
    });
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toContain('nothing was deleted');
    const closed = new FakeTerminal();
    const none = await run(['org', 'delete', 'acme'], closed, (text) => {
      if (text.includes('Type the organization id')) closed.end();
    });
    expect(none.status).toBe(2);
    expect(recorded).toEqual([]);
  });
});
