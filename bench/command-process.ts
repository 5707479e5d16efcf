import { readyUntilParentExits, startChild } from './processes.ts';

/**
 * A command (Apache, HAProxy, `node src/main.ts`) as a bench child: this module runs
 * `BENCH_COMMAND` and stops it when the bench goes, however it goes (a server started directly
 * would outlive a killed bench).
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

if (process.env.BENCH_COMMAND) {
  const { command, env, port, readyText } = JSON.parse(process.env.BENCH_COMMAND) as CommandSpec;
  const server = await startChild(command, { env, port, readyText }).catch((err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  });
  // While the bench still needs it: the bench sees this process exit.
  const exited = (code: number | null, signal: string | null) => {
    process.stderr.write(`${command.join(' ')} exited (${signal ?? code})\n`);
    process.exit(1);
  };
  server.child.once('exit', exited);
  readyUntilParentExits({ commandPid: server.pid }, () => {
    server.child.off('exit', exited);
    return server.stop(10_000);
  });
}
