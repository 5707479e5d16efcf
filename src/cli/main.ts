import { isHelp, parseCommandLine } from './args.ts';
import { DEFAULT_TIMEOUT_MS } from './client.ts';
import { commandNamed } from './commands.ts';
import { CliError, exitCodes } from './errors.ts';
import { formatHelp, formatShortUsage } from './help.ts';
import type { CliIo } from './io.ts';
import { printedJson } from './printed-json.ts';
import { VERSION } from '../release/version.ts';

export interface CliOptions {
  /** How long one request may take before the gateway counts as unreachable. */
  timeoutMs?: number;
}

/**
 * Runs `realmgate` with `argv` (without `node` and the script) and returns the exit status.
 * Takes the environment and the streams as arguments so tests need no subprocess.
 */
export async function runCli(
  argv: readonly string[],
  env: Record<string, string | undefined>,
  io: CliIo,
  options: CliOptions = {},
): Promise<number> {
  try {
    const command = parseCommandLine(argv);
    if (isHelp(command)) {
      io.stdout.write(formatHelp(command.group));
      return exitCodes.success;
    }
    if (command.name === 'version') {
      io.stdout.write(`${VERSION}\n`);
      return exitCodes.success;
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // parseCommandLine made it from its entry, so the entry is there.
    const output = await commandNamed(command.name)!.run(command, { env, io, timeoutMs });
    if ('text' in output) io.stdout.write(`${output.text}\n`);
    else if ('json' in output) io.stdout.write(`${printedJson(output.json)}\n`);
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
    case 'identityProvider':
      // The message already reads `error <status> <result>: <text>`, as scripts grep for it.
      return `${error.message}\n`;
    case 'config':
    case 'unreachable':
    case 'verification':
    case 'busy':
      return `realmgate: ${error.message}\n`;
    case 'outputClosed':
      // The reader chose to stop (`| head`); there is nothing to tell it.
      return '';
  }
}
