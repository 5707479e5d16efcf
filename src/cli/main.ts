import packageJson from '../../package.json' with { type: 'json' };
import { parseCommandLine } from './args.ts';
import { callApi, DEFAULT_TIMEOUT_MS, readConnection } from './client.ts';
import { buildRequest, formatHelp, formatShortUsage } from './commands.ts';
import { CliError, exitCodes } from './errors.ts';

/** Where the CLI writes; `process` itself fits, tests pass collectors. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

export interface CliOptions {
  /** How long one request may take before the gateway counts as unreachable. */
  timeoutMs?: number;
}

/**
 * Runs `realmgate` with `argv` (without `node` and the script) and returns the exit status.
 * Takes the environment and the output streams as arguments so tests need no subprocess.
 */
export async function runCli(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  options: CliOptions = {},
): Promise<number> {
  try {
    const command = parseCommandLine(argv);
    if (command.name === 'help') {
      io.stdout.write(formatHelp(command.group));
      return exitCodes.success;
    }
    if (command.name === 'version') {
      io.stdout.write(`${packageJson.version}\n`);
      return exitCodes.success;
    }
    // Credentials are read only now: help and version must work without them.
    const connection = readConnection(env);
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const data = await callApi(buildRequest(command), connection, timeoutMs);
    io.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
    return exitCodes.success;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.stderr.write(describeError(error));
    return error.exitCode;
  }
}

function describeError(error: CliError): string {
  switch (error.kind) {
    case 'usage':
      return `realmgate: ${error.message}\n${formatShortUsage(error.group)}`;
    case 'api':
      // The message already reads `error <status> <result>: <text>`, as scripts grep for it.
      return `${error.message}\n`;
    case 'config':
    case 'unreachable':
      return `realmgate: ${error.message}\n`;
  }
}
