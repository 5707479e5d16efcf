import { Readable } from 'node:stream';
import type { CliIo } from '../../src/cli/io.ts';

/** What a pipe feeding `text` looks like to the CLI (for --password-stdin). */
export function piped(text: string): Readable {
  return Readable.from([Buffer.from(text, 'utf8')]);
}

/**
 * Streams for `runCli` that keep what it prints, in `output`; `onStderr` sees each piece of
 * stderr as it comes (e.g. a prompt to answer).
 */
export function capturingIo(
  stdin: CliIo['stdin'] = piped(''),
  onStderr?: (text: string) => void,
): { io: CliIo; output: { stdout: string; stderr: string } } {
  const output = { stdout: '', stderr: '' };
  const io: CliIo = {
    stdin,
    stdout: { write: (text: string) => (output.stdout += text) },
    stderr: {
      write: (text: string) => {
        output.stderr += text;
        onStderr?.(text);
      },
    },
  };
  return { io, output };
}
