import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../../src/cli/commands.ts';
import { describeExitStatuses } from '../../../src/cli/errors.ts';
import { formatHelp, formatShortUsage } from '../../../src/cli/help.ts';

describe('usage lines derived from the command table', () => {
  const help = formatHelp();

  it('shows every command with its arguments and options, required ones unbracketed', () => {
    for (const entry of COMMANDS) expect(help).toContain(`  realmgate ${entry.name}`);
    expect(help).toContain('realmgate operation add <org> <ws> --name <name> [--environment <e>]');
    expect(help).toContain('[--environment <name>]...');
    expect(help).toContain('[--offline-max-enabled true|false]');
    expect(help).toContain('realmgate tokens revoke <id|name> | --all [--realm <realm>]');
  });

  it('wraps long usages under the arguments, within the width of the prose', () => {
    const lines = help.split('\n');
    expect(Math.max(...lines.map((line) => line.length))).toBeLessThanOrEqual(95);
    const at = lines.findIndex((line) => line.startsWith('  realmgate lifetimes set <realm> '));
    expect(lines[at + 1]).toMatch(/^ {26}\[--offline-idle <dur>\]/);
    expect(lines[at + 2]).toMatch(
      /^ {26}\[--offline-max-enabled true\|false\] \[--dpop-required true\|false\]$/,
    );
  });

  it('shows one group after a usage error, and every command for an unknown group', () => {
    expect(formatShortUsage('tokens')).toBe(
      'Usage:\n' +
        '  realmgate tokens list [--realm <realm>] [--user <username>]\n' +
        '  realmgate tokens revoke <id|name> | --all [--realm <realm>] [--user <username>]\n' +
        "Run 'realmgate --help' for details.\n",
    );
    expect(formatShortUsage('nope')).toContain('realmgate org create');
    expect(formatShortUsage('nope')).toContain('realmgate logout');
  });
});

describe('exit statuses, from the one table', () => {
  it('lists each status once in the help and in docs/tokens-and-cli.md', async () => {
    const statuses = describeExitStatuses();
    expect(statuses.map(({ status }) => status)).toEqual([0, 1, 2, 3, 4, 5, 6, 141]);
    const help = formatHelp();
    for (const { status, meaning } of statuses) expect(help).toContain(`  ${status}  ${meaning}\n`);
    const docs = await readFile(
      join(import.meta.dirname, '../../../docs/tokens-and-cli.md'),
      'utf8',
    );
    const documented = [...docs.matchAll(/^\| (\d+) +\|/gm)].map(([, status]) => Number(status));
    expect(documented).toEqual(statuses.map(({ status }) => status));
  });
});
