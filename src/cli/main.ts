import packageJson from '../../package.json' with { type: 'json' };
import { parseCommandLine } from './args.ts';
import { DEFAULT_TIMEOUT_MS } from './client.ts';
import {
  buildRequest,
  formatHelp,
  formatShortUsage,
  type ApiCommand,
  type Command,
  type ReadyCommand,
  type SessionCommand,
} from './commands.ts';
import { confirmOrganizationDeletion } from './confirm.ts';
import { CliError, exitCodes } from './errors.ts';
import { login } from './login.ts';
import { createOtpEnrollment, type OtpEnrollment } from './otp.ts';
import { readPassword, type CliStdin } from './password.ts';
import { runSession } from './session.ts';
import { callAs, resolveCaller } from './stored-login.ts';

/** Where the CLI reads and writes; `process` itself fits, tests pass fakes and collectors. */
export interface CliIo {
  /** Read only for passwords (and one-time passwords): a terminal (prompt) or a pipe. */
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
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (isSessionCommand(command)) {
      const output =
        command.name === 'login'
          ? { json: await login(command, env, io, timeoutMs) }
          : await runSession(command, env, io, timeoutMs);
      if ('text' in output) io.stdout.write(`${output.text}\n`);
      else if ('json' in output) io.stdout.write(formatJson(output.json));
      return exitCodes.success;
    }
    // Credentials are read only now: help and version must work without them. Without any in
    // the environment, the most recent master-realm login serves (administrators' commands).
    const caller = await resolveCaller(env, { realm: 'master' }, NO_CREDENTIALS);
    const wantsOtp = command.name === 'user create' && command.otp;
    const enrollment = wantsOtp ? createOtpEnrollment(command.username) : undefined;
    if (command.name === 'org delete') {
      await confirmOrganizationDeletion(command.org, command.confirmed, io);
    }
    const ready = await withSecrets(command, io, enrollment);
    const data = await callAs(caller, buildRequest(ready), timeoutMs);
    const printed = enrollment ? withEnrollment(data, enrollment) : data;
    io.stdout.write(formatJson(printed));
    return exitCodes.success;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.stderr.write(describeError(error));
    return error.exitCode;
  }
}

const NO_CREDENTIALS =
  'no credentials: set REALMGATE_TOKEN, or REALMGATE_USERNAME and REALMGATE_PASSWORD, ' +
  'of a master-realm user, or log in once with realmgate login master <username>';

const SESSION_COMMANDS = new Set<string>([
  'login',
  'token',
  'tokens list',
  'tokens revoke',
  'logout',
]);

function isSessionCommand(command: Command): command is SessionCommand {
  return SESSION_COMMANDS.has(command.name);
}

function formatJson(data: unknown): string {
  return `${JSON.stringify(data, null, 2)}\n`;
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
