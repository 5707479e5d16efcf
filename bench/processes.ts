import type { Server } from 'node:http';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A long-lived child of the bench (upstream, limit proxy, a gateway), started from a bench module. */
export interface BenchChild {
  readonly name: string;
  readonly pid: number;
  /** What the child printed on its readiness line (a JSON object). */
  readonly ready: Record<string, unknown>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();

/** Path of a module beside this one, e.g. `benchModule('upstream.ts')`. */
export function benchModule(file: string): string {
  return fileURLToPath(new URL(`./${file}`, import.meta.url));
}

/**
 * Starts `node --import tsx <bench module>` and waits for its readiness line: the first stdout
 * line that parses as JSON with `ready: true`. The child's stdin stays an open pipe, so a child
 * that watches it (every bench child does) exits when the bench dies in any way.
 */
export async function startChild(options: {
  name: string;
  module: string;
  env?: Record<string, string>;
  nodeArgs?: string[];
  readyTimeoutMs?: number;
}): Promise<BenchChild> {
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), '--import', 'tsx', benchModule(options.module)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, ...options.env },
    },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${options.name} was not ready in time`)),
      options.readyTimeoutMs ?? 60_000,
    );
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const parsed = parseJsonLine(line);
      if (parsed?.ready === true) {
        clearTimeout(timer);
        resolve(parsed);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${options.name} exited before it was ready (${signal ?? code})`));
    });
  });
  return {
    name: options.name,
    pid: child.pid ?? -1,
    ready,
    stop: (graceMs) => stopChild(child, graceMs),
  };
}

/**
 * Runs a bench module to completion with `input` on its stdin; resolves to its stdout. With
 * `cpuList`, the process runs on those CPUs only (through taskset, from its first instruction).
 */
export function runToCompletion(options: {
  module: string;
  input: string;
  timeoutMs: number;
  cpuList?: string;
}): Promise<string> {
  const node = [process.execPath, '--import', 'tsx', benchModule(options.module)];
  const [command, ...args] = options.cpuList
    ? ['taskset', '--cpu-list', options.cpuList, ...node]
    : node;
  const child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  running.add(child);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${options.module} took longer than ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.once('exit', (code, signal) => {
      running.delete(child);
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(chunks).toString('utf8'));
      else reject(new Error(`${options.module} failed (${signal ?? code})`));
    });
    child.stdin.end(options.input);
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

/** Memory of a running process from `/proc/<pid>/status`, in MiB (Linux only). */
export function memoryOf(pid: number): { rssMiB: number; peakRssMiB: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field: string) =>
      Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
    return { rssMiB: kib('VmRSS') / 1024, peakRssMiB: kib('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}

/** CPU time (user + system, all threads) a process has used so far, in microseconds. */
export function cpuMicrosOf(pid: number): number | undefined {
  try {
    // Fields after the command name (which may hold spaces), from `state`: utime is the 12th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    // Linux reports these in clock ticks of 1/100 s (USER_HZ) on every common platform.
    return Number.isFinite(ticks) ? ticks * 10_000 : undefined;
  } catch {
    return undefined;
  }
}

/** In a child: exit when the parent goes away (its end of our stdin closes). */
export function exitWithParent(onExit: () => Promise<void> | void): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void Promise.resolve()
      .then(onExit)
      .finally(() => process.exit(0));
  };
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** In a child: tell the parent we are ready (one JSON line on stdout). */
export function reportReady(details: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid, ...details })}\n`);
}

function parseJsonLine(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === 'object' && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * For the small helper servers (upstream, limit proxy): keep-alive as the gateway has it,
 * listen on loopback, report readiness, and close when the bench goes away.
 */
export function serveUntilParentExits(server: Server, port: number): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.listen(port, '127.0.0.1', () => reportReady({ port }));
  exitWithParent(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
}
