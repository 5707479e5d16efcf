import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { streamAnswer, type UpstreamAnswer } from '../outbound/forward.ts';

/**
 * For the few Keycloak answers the `/auth` proxy looks into (a console page to rewrite, a
 * grant's refusal to give its status): reads `answer` whole and hands its body to `serve` when
 * it is plain (not compressed) and at most `maxBytes`; anything else, or a body that turns out
 * larger, is relayed byte for byte with `relay`'s status and headers.
 */
export function serveSmallAnswer(
  answer: UpstreamAnswer,
  res: ServerResponse,
  relay: { status: number; headers: OutgoingHttpHeaders },
  maxBytes: number,
  serve: (body: Buffer) => void,
): void {
  const passThrough = (buffered: Buffer[]) => {
    res.writeHead(relay.status, relay.headers);
    for (const chunk of buffered) res.write(chunk);
    streamAnswer(answer, res);
  };
  const encoding = String(answer.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding !== 'identity' || Number(answer.headers['content-length'] ?? 0) > maxBytes) {
    passThrough([]);
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
    if (size > maxBytes) {
      answer.off('data', onData).off('end', onEnd);
      passThrough(chunks);
    }
  };
  const onEnd = () => serve(Buffer.concat(chunks));
  answer.on('data', onData).on('end', onEnd);
}
