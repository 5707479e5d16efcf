import { once } from 'node:events';
import { connect, type Socket } from 'node:net';

/**
 * A GET of `path` on a raw socket that reads the answer's head, then stops reading: a client
 * that takes none of a streamed answer, so the gateway's writes wait on it.
 */
export async function stalledGet(
  url: string,
  path: string,
  authorization: string,
): Promise<{ status: number; socket: Socket }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${authorization}\r\n\r\n`,
  );
  let head = '';
  while (!head.includes('\r\n\r\n')) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    head += chunk.toString('latin1');
  }
  socket.pause();
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), socket };
}
