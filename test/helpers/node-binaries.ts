import { execFile, spawn } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { childStdin } from './child-stdin.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The bin folder of the pinned Node 24 (scripts/node24.sh fetches it once). */
export async function node24Bin(): Promise<string> {
  const { stdout } = await promisify(execFile)(path.join(root, 'scripts/node24.sh'), [], {
    timeout: 300_000,
  });
  return stdout.trim();
}

/**
 * The bin folder of the machine's own Node 20: the first `node` on PATH that is 20.x, leaving
 * out the pinned Node 24's folder (first on PATH under `npm test`), else /usr/bin/node or
 * /usr/local/bin/node. Throws, saying what was looked at, when there is none.
 */
export async function node20Bin(exclude: string): Promise<string> {
  const dirs = (process.env.PATH ?? '').split(path.delimiter).filter((dir) => dir !== '');
  const candidates = [
    ...new Set([...dirs.map((dir) => path.resolve(dir)), '/usr/bin', '/usr/local/bin']),
  ].filter((dir) => dir !== path.resolve(exclude));
  const seen: string[] = [];
  for (const dir of candidates) {
    const node = path.join(dir, 'node');
    const version = await versionOf(node);
    if (version === undefined) continue;
    seen.push(`${node} ${version}`);
    if (version.startsWith('v20.')) return dir;
  }
  throw new Error(
    `no Node 20 on this machine, but the CLI package must be tried on it: install Node 20 ` +
      `(the machine's own node) on PATH or at /usr/bin/node; found: ${seen.join(', ') || 'no node'}`,
  );
}

async function versionOf(node: string): Promise<string | undefined> {
  try {
    await access(node, constants.X_OK);
    const { stdout } = await promisify(execFile)(node, ['--version'], { timeout: 30_000 });
    return stdout.trim();
  } catch {
    return undefined;
  }
}

/** What a finished process left: its exit status and output. */
export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `file` with `args` in `env`, `input` on its stdin, and waits for it to exit. */
export function runProcess(
  file: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; input?: string; cwd?: string },
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: options.env, cwd: options.cwd, timeout: 120_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    childStdin(child.stdin, reject).end(options.input ?? '');
  });
}
