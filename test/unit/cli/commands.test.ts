import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { COMMAND_GROUPS, COMMANDS, commandNamed } from '../../../src/cli/commands.ts';

describe('the command table', () => {
  const names = COMMANDS.flatMap((entry) => entry.names);

  it('declares each command once, none named like the built-in help and version', () => {
    expect(new Set(names).size).toBe(names.length);
    expect(names).not.toContain('help');
    expect(names).not.toContain('version');
    expect(names).toContain('user disable');
    expect(commandNamed('user get|disable')).toBeUndefined();
  });

  it('derives the groups from the first words, in the order of the help', () => {
    expect(COMMAND_GROUPS).toEqual([
      'org',
      'workspace',
      'user',
      'operation',
      'lifetimes',
      'realms',
      'login',
      'token',
      'proof',
      'tokens',
      'logout',
      'audit',
    ]);
  });

  it('parses every declared command from its words', () => {
    // The fewest arguments each command takes: its positionals, and a value for required options.
    for (const entry of COMMANDS) {
      for (const name of entry.names) {
        const values: Record<string, string> = {
          org: 'acme',
          ws: 'ws1',
          realm: 'acme',
          method: 'GET',
          url: 'http://localhost:8000/api/platform/organizations',
        };
        const positionals = entry.positionals.map((p) => values[p] ?? 'x');
        const required = Object.entries(entry.options)
          .filter(([, option]) => option.required)
          .map(([option]) => `--${option}=x`);
        const either = entry.optional ? [`--${entry.optional.or}`] : [];
        const extra = name === 'lifetimes set' ? ['--access=1d'] : [];
        const argv = [...name.split(' '), ...positionals, ...required, ...either, ...extra];
        expect(parseCommandLine(argv).name, argv.join(' ')).toBe(name);
      }
    }
  });
});
