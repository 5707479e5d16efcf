import { emitKeypressEvents } from 'node:readline';
import type { Args } from './command-spec.ts';
import { CliError, usageError } from './errors.ts';
import type { CliStdin, Prompter } from './io.ts';

/** Where a password comes from; never the command line. */
export type PasswordSource = 'prompt' | 'stdin';

/** `--password-stdin`: piped in; else typed at a prompt without echo. */
export function passwordSourceOf(args: Args): PasswordSource {
  return args.has('password-stdin') ? 'stdin' : 'prompt';
}

// The API takes at most 1024 characters; anything far beyond that is not a password.
const MAX_STDIN_BYTES = 8192;

/**
 * Reads a new user's password: typed twice without echo at a terminal (`prompt`), or all of
 * stdin with one trailing line break removed (`stdin`). Each source refuses the other kind of
 * stdin: piping into a prompt, or `--password-stdin` at a terminal, where it would be echoed.
 */
export async function readPassword(
  source: PasswordSource,
  io: Prompter,
  who: string,
): Promise<string> {
  if (source === 'stdin') {
    if (io.stdin.isTTY) {
      throw usageError(
        '--password-stdin reads a pipe or a file, but stdin is a terminal; ' +
          'leave --password-stdin out to type the password without echo',
        'user',
      );
    }
    const [password, ...more] = await readPipedLines(io.stdin, 'user');
    // A second line is more likely a mistake (a stray blank line) than part of a password.
    if (more.length > 0) {
      throw usageError('--password-stdin: stdin holds more than one line', 'user');
    }
    return password!;
  }
  if (!io.stdin.isTTY) {
    throw usageError(
      'no terminal to ask for the password: pipe it in with --password-stdin, ' +
        `e.g. printf '%s\\n' "$PASSWORD" | realmgate user create|passwd ... --password-stdin`,
      'user',
    );
  }
  const [password, repeated] = await promptHidden(
    io,
    [`Password for ${who}: `, 'Repeat the password: '],
    'user',
  );
  if (password === '') throw usageError('the password must not be empty', 'user');
  if (password !== repeated) throw usageError('the two passwords differ', 'user');
  return password!;
}

/**
 * Reads all of a piped stdin as UTF-8 lines, with one trailing line break removed; refuses an
 * empty stdin and more than 8 KiB. `group` selects the usage lines shown with an error.
 */
export async function readPipedLines(stdin: CliStdin, group: string): Promise<string[]> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stdin) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    size += bytes.length;
    if (size > MAX_STDIN_BYTES) {
      throw usageError(`--password-stdin: more than ${MAX_STDIN_BYTES} bytes on stdin`, group);
    }
    chunks.push(bytes);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw usageError('--password-stdin: stdin is not UTF-8 text', group);
  }
  const lines = text.replace(/\r?\n$/, '').split(/\r?\n|\r/);
  if (lines[0] === '') throw usageError('--password-stdin: stdin holds no password', group);
  return lines;
}

interface Key {
  name?: string;
  ctrl?: boolean;
  meta?: boolean;
}

/**
 * Asks each prompt in turn with echo off and returns the lines typed. One keypress listener
 * serves all prompts, so lines that arrive in one chunk (a paste) are not lost between them.
 * Ctrl-C, or Ctrl-D on an empty line, cancels; the terminal is restored in every case.
 * `group` selects the usage lines shown with an error.
 */
export async function promptHidden(
  io: Prompter,
  prompts: string[],
  group: string,
): Promise<string[]> {
  const { stdin, stderr } = io;
  if (!stdin.setRawMode) {
    throw new CliError('config', 'cannot turn off echo on this terminal; use --password-stdin');
  }
  emitKeypressEvents(stdin);
  const lines: string[] = [];
  let line = '';
  let afterReturn = false;
  // Echo goes off before the prompt shows, so nothing typed right after it is ever echoed.
  stdin.setRawMode(true);
  try {
    stderr.write(prompts[0]!);
    return await new Promise<string[]>((resolve, reject) => {
      const finish = (error?: CliError) => {
        stdin.off('keypress', onKey);
        stdin.off('end', onEnd);
        if (error) reject(error);
        else resolve(lines);
      };
      const onEnd = () => finish(usageError('stdin closed before a password was typed', group));
      const onKey = (text: string | undefined, key: Key | undefined) => {
        const name = key?.name;
        const crlf = afterReturn && name === 'enter';
        afterReturn = name === 'return';
        if (crlf) return;
        if (key?.ctrl && (name === 'c' || (name === 'd' && line === ''))) {
          stderr.write('\n');
          finish(usageError('password prompt cancelled', group));
        } else if (name === 'return' || name === 'enter') {
          stderr.write('\n');
          lines.push(line);
          line = '';
          if (lines.length === prompts.length) finish();
          else stderr.write(prompts[lines.length]!);
        } else if (name === 'backspace') {
          line = Array.from(line).slice(0, -1).join('');
        } else if (key?.ctrl && name === 'u') {
          line = '';
        } else if (text !== undefined && !key?.ctrl && !key?.meta && !isControl(text)) {
          line += text;
        }
      };
      stdin.on('keypress', onKey);
      stdin.on('end', onEnd);
      stdin.resume();
    });
  } finally {
    stdin.setRawMode(false);
    // A flowing stdin would keep the process alive after the command is done.
    stdin.pause();
  }
}

function isControl(text: string): boolean {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f\u007f-\u009f]/.test(text);
}
