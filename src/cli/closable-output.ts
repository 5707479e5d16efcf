import { CliError } from './errors.ts';

/** A stream the CLI prints to: `process.stdout` or `process.stderr`. */
interface OutputStream {
  write(text: string): unknown;
  on(event: 'error', listener: (error: NodeJS.ErrnoException) => void): unknown;
}

/**
 * What the CLI writes `stream` through when its reader may stop reading (`realmgate audit list
 * --all | head`): the pipe then fails with EPIPE, which Node reports as an 'error' event that,
 * unhandled, ends the process with a stack trace. Here it is noted instead (`closed`), and the
 * next write throws an `outputClosed` CliError, so a long listing stops at its next page and
 * the command ends as `yes | head` does (status 141), holding no lock and leaving no file.
 * `onClosed` runs once, when the reader is found gone. Other errors are left to Node.
 */
export function closableOutput(
  stream: OutputStream,
  onClosed: () => void = () => {},
): { write(text: string): void; readonly closed: boolean } {
  let closed = false;
  stream.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
    if (!closed) onClosed();
    closed = true;
  });
  return {
    write(text) {
      if (closed) throw new CliError('outputClosed', 'the reader of the output stopped reading');
      stream.write(text);
    },
    get closed() {
      return closed;
    },
  };
}
