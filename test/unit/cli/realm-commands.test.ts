import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../src/cli/args.ts';
import { buildRequest } from '../../../src/cli/commands.ts';
import { formatHelp } from '../../../src/cli/help.ts';

describe('realmgate realms protect', () => {
  it('posts to the brute-force detection endpoint, without a body', () => {
    const command = parseCommandLine(['realms', 'protect']);
    expect(command).toEqual({ name: 'realms protect' });
    expect(buildRequest(command)).toEqual({
      method: 'POST',
      path: '/api/platform/brute-force-detection',
    });
  });

  it('takes no arguments and is listed in the help', () => {
    expect(() => parseCommandLine(['realms', 'protect', 'master'])).toThrow('too many arguments');
    expect(() => parseCommandLine(['realms'])).toThrow('missing realms command');
    expect(formatHelp()).toContain('realmgate realms protect\n');
  });
});
