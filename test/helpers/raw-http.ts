import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  /** Lowercase names; repeated headers joined with ', '. */
  headers: Record<string, string>;
  body: string;
  /** Every status line the server sent, interim ones (100 Continue) included. */
  statusLines: string[];
}

/**
 * Sends bytes exactly as given (a client library would normalise or refuse many of the requests
 * the hostile tests need) and reads one answer. `body` is written after the head, or once the
 * server answers `100 Continue` when `waitForContinue` is set.
 */
export function rawRequest(
  url: string,
  head: string,
  options: { body?: string | Buffer; waitForContinue?: boolean; timeoutMs?: number } = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let received = Buffer.alloc(0);
    let bodySent = !options.body;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `no complete answer within ${options.timeoutMs ?? 10_000} ms to ${JSON.stringify(head.split('\r\n')[0])}; got ${JSON.stringify(received.toString('latin1'))}`,
        ),
      );
    }, options.timeoutMs ?? 10_000);
    const finish = (response: RawResponse) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(response);
    };
    socket.on('connect', () => {
      socket.write(Buffer.from(head, 'latin1'));
      if (options.body && !options.waitForContinue) {
        socket.write(options.body);
        bodySent = true;
      }
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const parsed = parseAnswer(received);
      if (!parsed) return;
      if (parsed.status === 100 && !bodySent) {
        socket.write(options.body!);
        bodySent = true;
      }
      if (parsed.complete) finish(parsed.response);
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('end', () => {
      const parsed = parseAnswer(received, true);
      if (parsed?.complete) finish(parsed.response);
      else {
        clearTimeout(timer);
        reject(
          new Error(
            `connection closed without an answer: ${JSON.stringify(received.toString('latin1'))}`,
          ),
        );
      }
    });
  });
}

/** Parses interim answers and one final answer (Content-Length or close-delimited). */
function parseAnswer(
  data: Buffer,
  closed = false,
): { status: number; complete: boolean; response: RawResponse } | undefined {
  const text = data.toString('latin1');
  const statusLines: string[] = [];
  let offset = 0;
  for (;;) {
    const end = text.indexOf('\r\n\r\n', offset);
    if (end < 0) return undefined;
    const lines = text.slice(offset, end).split('\r\n');
    const statusLine = lines[0]!;
    statusLines.push(statusLine);
    const status = Number(statusLine.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    offset = end + 4;
    if (status >= 100 && status < 200) {
      if (offset >= text.length && !closed)
        return { status, complete: false, response: { status, headers, body: '', statusLines } };
      continue;
    }
    const length = headers['content-length'];
    const bodyBytes = data.subarray(Buffer.byteLength(text.slice(0, offset), 'latin1'));
    if (headers['transfer-encoding']?.includes('chunked')) {
      const chunks = dechunk(bodyBytes);
      const body = chunks?.toString('utf8') ?? '';
      return {
        status,
        complete: chunks !== undefined,
        response: { status, headers, body, statusLines },
      };
    }
    const complete = length !== undefined ? bodyBytes.length >= Number(length) : closed;
    const body = bodyBytes
      .subarray(0, length !== undefined ? Number(length) : undefined)
      .toString('utf8');
    return { status, complete, response: { status, headers, body, statusLines } };
  }
}

/** The body of a complete chunked message, or undefined while it is incomplete. */
function dechunk(data: Buffer): Buffer | undefined {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', offset);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(data.subarray(offset, lineEnd).toString('latin1'), 16);
    if (size === 0) return Buffer.concat(parts);
    if (data.length < lineEnd + 2 + size + 2) return undefined;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
}
