import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { readyUntilParentExits, startChild } from './processes.ts';

/**
 * A server that is not a bench module (Apache, HAProxy, `node src/main.ts`) as a bench child:
 * this module runs the command given in `BENCH_COMMAND`, says it is ready once the command's
 * stdout shows `readyText` (else once `port` accepts connections), and stops the command when
 * the bench goes away, however it goes: a server started directly would outlive a killed bench.
 */
export interface CommandSpec {
  command: string[];
  env?: Record<string, string>;
  port: number;
  readyText?: string;
}

/** Starts `spec`; `ready.commandPid` is the server's own pid (to pin it and its children). */
export async function startCommand(spec: CommandSpec) {
  const child = await startChild('command-process.ts', {
    env: { BENCH_COMMAND: JSON.stringify(spec) },
  });
  return { ...child, commandPid: Number(child.ready.commandPid) };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const answer = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => answer(true)).once('error', () => answer(false));
    socket.setTimeout(1000, () => answer(false));
  });
}

async function runCommand(spec: CommandSpec): Promise<void> {
  const [file, ...args] = spec.command;
  const server = spawn(file!, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...spec.env },
  });
  let exited = false;
  server.once('exit', (code, signal) => {
    exited = true;
    // Before it was ready, or while the bench still needs it: the bench sees this one exit.
    process.stderr.write(`${spec.command.join(' ')} exited (${signal ?? code})\n`);
    process.exit(1);
  });
  let sawText = false;
  createInterface({ input: server.stdout }).on('line', (line) => {
    if (spec.readyText && line.includes(spec.readyText)) sawText = true;
  });
  const deadline = Date.now() + 80_000;
  while (!(spec.readyText ? sawText : await accepts(spec.port))) {
    if (Date.now() > deadline) throw new Error(`${file}: not ready in 80 s`);
    await sleep(100);
  }
  readyUntilParentExits({ commandPid: server.pid }, async () => {
    if (exited) return;
    server.removeAllListeners('exit');
    const gone = new Promise<void>((resolve) => server.once('exit', () => resolve()));
    server.kill('SIGTERM');
    const timer = setTimeout(() => server.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  });
}

if (process.env.BENCH_COMMAND) {
  await runCommand(JSON.parse(process.env.BENCH_COMMAND) as CommandSpec);
}
