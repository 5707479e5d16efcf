import { once } from 'node:events';
import { connect, type Socket } from 'node:net';

/**
 * A GET of `path` on a raw socket that reads the answer's head, then stops reading: a client
 * that takes none of a streamed answer, so the gateway's writes wait on it. `close`: the
 * connection ends with the answer (`Connection: close`).
 */
export async function stalledGet(
  url: string,
  path: string,
  authorization: string,
  close = false,
): Promise<{ status: number; socket: Socket }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${authorization}\r\n` +
      `${close ? 'Connection: close\r\n' : ''}\r\n`,
  );
  let head = '';
  while (!head.includes('\r\n\r\n')) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    head += chunk.toString('latin1');
  }
  socket.pause();
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), socket };
}

/**
 * A GET of `path` on a raw socket that takes the answer a little at a time: one read of what has
 * come, then `pauseMs` of nothing, again and again. Never silent for long, it still takes the
 * answer far slower than the gateway makes it. `ended` resolves once the connection closes
 * (`Connection: close`: a whole answer closes it too) with whether the answer came whole (its
 * chunked body's last chunk).
 */
export async function tricklingGet(
  url: string,
  path: string,
  authorization: string,
  pauseMs: number,
): Promise<{ status: number; socket: Socket; ended: Promise<{ whole: boolean }> }> {
  const { status, socket } = await stalledGet(url, path, authorization, true);
  let tail = '';
  socket.on('data', (chunk: Buffer) => {
    tail = (tail + chunk.toString('latin1')).slice(-16);
    socket.pause();
    setTimeout(() => socket.resume(), pauseMs);
  });
  // A connection the gateway cut may end in a reset: its close is what the caller waits for.
  socket.on('error', () => undefined);
  const ended = once(socket, 'close').then(() => ({ whole: tail.endsWith('\r\n0\r\n\r\n') }));
  socket.resume();
  return { status, socket, ended };
}
