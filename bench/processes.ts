import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { childStdin } from '../test/helpers/child-stdin.ts';

const running = new Set<ChildProcess>();

/**
 * How a child runs, and when a long-lived one is ready: its `{"ready":true...}` line, else the
 * first line holding `readyText`, else once `port` accepts.
 */
type How = {
  env?: object;
  nodeArgs?: string[];
  cpuList?: string;
  readyText?: string;
  port?: number;
};

/**
 * Spawns a bench module (bench/'s, or another tree's by absolute path) on this Node, or a
 * command; its stdin a pipe, so a module exits when the bench dies in any way. Its stderr goes
 * on to the bench's, the last lines kept: a child that dies says why.
 */
function spawnChild(module: string | string[], how: How) {
  const file = (m: string) =>
    path.isAbsolute(m) ? m : fileURLToPath(new URL(`./${m}`, import.meta.url));
  const words =
    typeof module === 'string' ? [process.execPath, ...(how.nodeArgs ?? []), file(module)] : module;
  const [command, ...args] = how.cpuList ? ['taskset', '--cpu-list', how.cpuList, ...words] : words;
  const env = { ...process.env, ...how.env };
  const child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
  running.add(child);
  child.once('exit', () => running.delete(child));
  const tail: string[] = [];
  // A command that cannot be run (not installed): its reason is its last words.
  child.once('error', (err) => tail.push(err.message));
  createInterface({ input: child.stderr }).on('line', (line) => {
    process.stderr.write(`${line}\n`);
    if (tail.push(line) > 40) tail.shift();
  });
  return { child, lastWords: () => lastWords(tail) };
}

/** A dead child's last three lines on stderr, without blanks, stack frames and carets. */
export function lastWords(lines: string[]): string {
  const said = lines.map((l) => l.trim()).filter((l) => l && !/^at |^\^+$/.test(l));
  return said.slice(-3).join(' | ') || 'nothing on stderr';
}

/**
 * Starts a long-lived child and waits until it is ready; one that exits first rejects, with
 * what it said last. `stop`: SIGTERM, then SIGKILL after `graceMs`.
 */
export async function startChild(module: string | string[], how: How) {
  const { child, lastWords: said } = spawnChild(module, how);
  const name = typeof module === 'string' ? module : module[0];
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${name}: not ready in 90 s: ${said()}`));
      child.kill('SIGKILL');
    }, 90_000);
    const done = (details: Record<string, unknown>) => {
      clearTimeout(timer);
      resolve(details);
    };
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (how.readyText ? line.includes(how.readyText) : line.startsWith('{"ready":true')) {
        done(how.readyText ? {} : (JSON.parse(line) as Record<string, unknown>));
      }
    });
    if (how.port !== undefined && !how.readyText) {
      void whenAccepting(how.port, child).then((accepted) => accepted && done({}));
    }
    // 'close', not 'exit': after its stderr's last lines have been read.
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited before it was ready (${signal ?? code}): ${said()}`));
    });
  });
  return { pid: child.pid!, child, ready, stop: (graceMs?: number) => stopChild(child, graceMs) };
}

/** Whether `port` on 127.0.0.1 accepted a connection (tried every 100 ms) while `child` ran. */
async function whenAccepting(port: number, child: ChildProcess): Promise<boolean> {
  const accepts = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      const answer = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.once('connect', () => answer(true)).once('error', () => answer(false));
      socket.setTimeout(1000, () => answer(false));
    });
  while (child.exitCode === null && child.signalCode === null) {
    if (await accepts()) return true;
    await sleep(100);
  }
  return false;
}

/**
 * Runs a bench module with `input` on stdin; its stdout. With `hold`, stdin stays open until
 * `hold.started` (its signal to start), each line of stdout to `hold.onLine`. `stop`: SIGTERM,
 * which load.ts takes as "finish now".
 */
export function runToCompletion(
  module: string,
  input: string,
  timeoutMs: number,
  cpuList?: string,
  hold?: { started: Promise<void>; onLine: (line: string) => void },
  stop?: AbortSignal,
) {
  const { child, lastWords: said } = spawnChild(module, { cpuList });
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    stop?.addEventListener('abort', () => child.kill('SIGTERM'), { once: true });
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(chunks).toString('utf8'));
      else reject(new Error(`${module} failed (${signal ?? code}): ${said()}`));
    });
    // A module that died before reading its input rejects on its exit, with its last words.
    const stdin = childStdin(child.stdin, reject);
    if (hold) {
      createInterface({ input: child.stdout }).on('line', hold.onLine);
      stdin.write(input);
      void hold.started.then(() => stdin.end());
    } else {
      stdin.end(input);
    }
  });
}

async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Stops every child the bench started and has not stopped yet. */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...running].map((child) => stopChild(child, 5_000)));
}

/** `/proc/<pid>/<name>` (Linux), or '' once the process is gone. */
export function procFile(pid: number | string, name: string): string {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8');
  } catch {
    return '';
  }
}

/** Peak resident memory (VmHWM) of a running process, in MiB. */
export function peakRssMiB(pid: number): number | undefined {
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(procFile(pid, 'status'))?.[1]) / 1024 || undefined;
}

/** In a child: tell the bench it is ready; exit when the bench goes away or says so. */
export function readyUntilParentExits(details: object, onExit: () => Promise<void> | void): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void Promise.resolve()
      .then(onExit)
      .finally(() => process.exit(0));
  };
  process.stdin.on('end', stop).on('error', stop).resume();
  process.once('SIGTERM', stop).once('SIGINT', stop);
  process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid, ...details })}\n`);
}

/** CPU seconds (user + system, all threads) `pid` has used so far, or 0 if it is gone. */
export function cpuSeconds(pid: number): number {
  // Fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
  const stat = procFile(pid, 'stat');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND || 0;
}

/** CPU seconds used between two readings by pid; a process gone meanwhile is missed, never subtracted. */
export const cpuGrowth = (before: Map<number, number>, after: Map<number, number>): number =>
  [...after].reduce((sum, [pid, now]) => sum + Math.max(0, now - (before.get(pid) ?? 0)), 0);
/** USER_HZ, 100 on every Linux the bench runs on (`getconf CLK_TCK`). */
const CLOCK_TICKS_PER_SECOND = 100;
