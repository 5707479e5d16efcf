import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { streamAnswer, type UpstreamAnswer } from '../outbound/forward.ts';

/**
 * What a hook learns of an answer's body (auth-proxy.ts `beforeAnswer`), read as it streams:
 * its size, and whether it holds the marker the hook looks for. Never the body itself, so that
 * no answer, however large a realm's theme makes it, is held whole.
 */
export interface AnswerBody {
  bytes: number;
  /** The marker occurs in the body (false when none was asked for). */
  marked: boolean;
}

/**
 * Relays Keycloak's answer to the client byte for byte, and runs `hook` with what its body held
 * (`AnswerBody`) before the client has it all: an answer of at most `holdBytes` (Keycloak's
 * own logout pages, an RFC 7009 answer) is held, head included, until `hook` is done; a larger
 * one streams as it comes, its last chunk held until then, so that what the answer ended is
 * applied before its client can read the whole of it. A compressed answer (the gateway never
 * inflates) is relayed as it comes and `hook` is not run.
 */
export function serveHookedAnswer(
  answer: UpstreamAnswer,
  res: ServerResponse,
  head: { status: number; headers: OutgoingHttpHeaders },
  options: { holdBytes: number; marker?: Buffer },
  hook: (body: AnswerBody) => Promise<void>,
): void {
  const encoding = String(answer.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity') {
    res.writeHead(head.status, head.headers);
    streamAnswer(answer, res);
    return;
  }
  const scan = markerScan(options.marker);
  let bytes = 0;
  let held: Buffer[] | undefined = [];
  let last: Buffer | undefined;
  const resume = () => answer.resume();
  const send = (chunk: Buffer) => {
    if (!res.write(chunk)) {
      answer.pause();
      res.once('drain', resume);
    }
  };
  answer.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    scan.feed(chunk);
    if (held) {
      held.push(chunk);
      if (bytes <= options.holdBytes) return;
      // Past the bound: the head and what was held go out, but for the last chunk.
      res.writeHead(head.status, head.headers);
      last = held.pop();
      for (const before of held) send(before);
      held = undefined;
      return;
    }
    send(last!);
    last = chunk;
  });
  answer.on('end', () => {
    void hook({ bytes, marked: scan.found() }).then(() => {
      if (held) res.writeHead(head.status, head.headers).end(Buffer.concat(held));
      else res.end(last);
    });
  });
}

/**
 * Looks for `marker` across chunks, keeping only the marker's length less one of what came
 * before (a marker split between two chunks).
 */
function markerScan(marker: Buffer | undefined) {
  let found = false;
  let carry = Buffer.alloc(0);
  return {
    feed(chunk: Buffer) {
      if (!marker || found) return;
      const window = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
      found = window.includes(marker);
      carry = Buffer.from(window.subarray(Math.max(window.length - (marker.length - 1), 0)));
    },
    found: () => found,
  };
}
