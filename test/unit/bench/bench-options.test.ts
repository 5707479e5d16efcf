import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const run = (...args: string[]) =>
  spawnSync(process.execPath, ['bench/ab.ts', ...args], { cwd: root, encoding: 'utf8' });

describe('a bench script asked for help or given an unknown option', () => {
  it('lists its options and their defaults for --help, and exits 0 before starting anything', () => {
    const answer = run('--help');
    expect(answer.status).toBe(0);
    expect(answer.stdout).toContain('--route (forwarded)');
    expect(answer.stdout).toContain('--rounds (5)');
    expect(answer.stderr).toBe('');
  });

  it('names the unknown option on stderr with the same list, and exits 2 without a stack trace', () => {
    const answer = run('--bogus');
    expect(answer.status).toBe(2);
    expect(answer.stderr).toContain("Unknown option '--bogus'");
    expect(answer.stderr).toContain('--round-seconds (5)');
    expect(answer.stderr).not.toContain('    at ');
  });
});
