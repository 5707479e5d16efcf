import packageJson from '../../package.json' with { type: 'json' };
import { parseCommandLine } from './args.ts';
import { callApi, DEFAULT_TIMEOUT_MS, readConnection } from './client.ts';
import {
  buildRequest,
  formatHelp,
  formatShortUsage,
  type ApiCommand,
  type ReadyCommand,
} from './commands.ts';
import { CliError, exitCodes } from './errors.ts';
import { createOtpEnrollment, type OtpEnrollment } from './otp.ts';
import { readPassword, type CliStdin } from './password.ts';

/** Where the CLI reads and writes; `process` itself fits, tests pass fakes and collectors. */
export interface CliIo {
  /** Read only for a new user's password: a terminal (prompt) or a pipe (--password-stdin). */
  stdin: CliStdin;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

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
    const wantsOtp = command.name === 'user create' && command.otp;
    const enrollment = wantsOtp ? createOtpEnrollment(command.username) : undefined;
    const ready = await withSecrets(command, io, enrollment);
    const data = await callApi(buildRequest(ready), connection, timeoutMs);
    const printed = enrollment ? withEnrollment(data, enrollment) : data;
    io.stdout.write(`${JSON.stringify(printed, null, 2)}\n`);
    return exitCodes.success;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.stderr.write(describeError(error));
    return error.exitCode;
  }
}

/** Reads what `user create` must not take from the command line; other commands pass as is. */
async function withSecrets(
  command: ApiCommand,
  io: CliIo,
  enrollment: OtpEnrollment | undefined,
): Promise<ReadyCommand> {
  if (command.name !== 'user create') return command;
  const who = `${command.username} (realm ${command.realm})`;
  const password = await readPassword(command.passwordFrom, io, who);
  return { ...command, password, otpSecret: enrollment?.secret };
}

/**
 * The generated OTP secret is printed once, beside the new user's fields, so `jq -r .otp_secret`
 * finds it; it exists nowhere else the user can read it.
 */
function withEnrollment(data: unknown, enrollment: OtpEnrollment): Record<string, unknown> {
  const otp = { otp_secret: enrollment.secret, otpauth_uri: enrollment.uri };
  const isRecord = typeof data === 'object' && data !== null && !Array.isArray(data);
  return isRecord ? { ...data, ...otp } : { data, ...otp };
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
