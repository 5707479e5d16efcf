/** The stream the CLI reads a password from: `process.stdin` fits, tests pass a fake terminal. */
export interface CliStdin extends NodeJS.ReadableStream {
  isTTY?: boolean;
  /** Present on terminals: turns echo and line editing off (`true`) or back on. */
  setRawMode?(mode: boolean): unknown;
}

/** Where the CLI reads and writes; `process` itself fits, tests pass fakes and collectors. */
export interface CliIo {
  /** Read only for passwords (and one-time passwords): a terminal (prompt) or a pipe. */
  stdin: CliStdin;
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  /** Waits `ms` (none when 0 or less): the system's timers unless a test passes its own. */
  wait?(ms: number): Promise<void>;
}

/** What a prompt needs: prompts go to stderr, so stdout stays the JSON a script reads. */
export type Prompter = Pick<CliIo, 'stdin' | 'stderr'>;

/** What a command runs with: the environment, the streams, and the timeout of one request. */
export interface RunContext {
  env: Record<string, string | undefined>;
  io: CliIo;
  /** How long one request may take before the gateway counts as unreachable. */
  timeoutMs: number;
}

/** What a command prints on stdout: JSON data, a bare access token, or nothing. */
export type CommandOutput = { json: unknown } | { text: string } | { nothing: true };
