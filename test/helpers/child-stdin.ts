import type { Writable } from 'node:stream';

/**
 * A child process's stdin, ready to be written: a child that exits without reading it (a CLI
 * refusing the Node it runs on, a command failing at once) may close the pipe before the input
 * is written, and that EPIPE, unhandled, would end the parent. It is no failure of the parent's:
 * the child's exit status and output say what happened. Any other error of the pipe goes to
 * `failed`.
 */
export function childStdin(stdin: Writable, failed: (error: Error) => void): Writable {
  return stdin.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') failed(error);
  });
}
