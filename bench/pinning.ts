import { execFile } from 'node:child_process';
import { cpus } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * CPU sets for measurements that pin: the process(es) measured share the last CPU, everything
 * that feeds them (the upstream, the load generators) gets the others. Undefined with one CPU.
 */
function cpuSets(): { measured: string; feeders: string; all: string } | undefined {
  const count = cpus().length;
  if (count < 2) return undefined;
  return {
    measured: String(count - 1),
    feeders: count === 2 ? '0' : `0-${count - 2}`,
    all: `0-${count - 1}`,
  };
}

/** Pins every thread of `pid` to `cpuList` with taskset (util-linux); false when that failed. */
async function pin(pid: number, cpuList: string): Promise<boolean> {
  try {
    await run('taskset', ['--all-tasks', '--cpu-list', '--pid', cpuList, String(pid)]);
    return true;
  } catch {
    return false;
  }
}

/** The processes kept off the measured CPU: the upstream, and Keycloak's process group. */
export interface Others {
  pids: number[];
  processGroups: number[];
}

/** Members of a process group (pgrep, procps). */
async function membersOf(processGroup: number): Promise<number[]> {
  try {
    const { stdout } = await run('pgrep', ['-g', String(processGroup)]);
    return stdout.split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Runs `measure` with the `measured` processes pinned together on the last CPU and the `others`
 * on the other(s); `measure` gets the CPU list for its load generators, or undefined when
 * pinning was not possible (one CPU, no taskset, an unknown pid): it then runs unpinned.
 * Everything is unpinned afterwards.
 */
export async function withPinning<T>(
  measured: (number | undefined)[],
  others: Others,
  measure: (feeders: string | undefined) => Promise<T>,
): Promise<T> {
  const sets = cpuSets();
  const pids = measured.filter((pid): pid is number => pid !== undefined);
  if (!sets || pids.length !== measured.length) return measure(undefined);
  const groups = await Promise.all(others.processGroups.map(membersOf));
  const elsewhere = [...others.pids, ...groups.flat()];
  const unpin = () => Promise.all([...pids, ...elsewhere].map((pid) => pin(pid, sets.all)));
  const pinned = await Promise.all([
    ...pids.map((pid) => pin(pid, sets.measured)),
    ...elsewhere.map((pid) => pin(pid, sets.feeders)),
  ]);
  if (!pinned.every(Boolean)) {
    await unpin();
    return measure(undefined);
  }
  try {
    return await measure(sets.feeders);
  } finally {
    await unpin();
  }
}
