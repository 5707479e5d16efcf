import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

const last = cpus().length - 1;
/** Every CPU of the machine, as a taskset list (`0-1` on two). */
export const ALL_CPUS = `0-${last}`;
/** Per core (pairs.ts, ab.ts): the measured processes on the last CPU, the rest on the others. */
export const [MEASURED_CPU, FEEDER_CPUS] = [`${last}`, `0-${Math.max(last - 1, 0)}`];

/** Every thread of `pid` on `cpuList` (taskset, util-linux); false if that failed. */
export function taskset(pid: number, cpuList: string): Promise<boolean> {
  const args = ['--all-tasks', '--cpu-list', '--pid', cpuList, `${pid}`];
  return run('taskset', args).then(
    () => true,
    () => false,
  );
}

/** `pid` and every process under it (pgrep -P, level by level). */
export async function processTree(pid: number): Promise<number[]> {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    const children = await run('pgrep', ['-P', `${tree[i]}`]).catch(() => undefined);
    tree.push(...(children?.stdout.split('\n').filter(Boolean).map(Number) ?? []));
  }
  return tree;
}

/**
 * Every thread of `pid` and of the processes under it on `cpuList` (a server with its workers,
 * Keycloak under its start script); processes forked later inherit it. False if any failed.
 */
export async function pinTree(pid: number, cpuList: string): Promise<boolean> {
  const pids = await processTree(pid);
  return (await Promise.all(pids.map((p) => taskset(p, cpuList)))).every(Boolean);
}
