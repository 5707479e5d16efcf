import { request, type Agent } from 'node:http';

export interface AddressedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body parsed, when it is JSON; else empty (Keycloak's pages are HTML). */
  json: Record<string, unknown>;
  /** The body as text: a login page, whose form a test posts next. */
  text: string;
}

/**
 * One HTTP request whose socket is bound to `localAddress` (127.0.0.2, 127.0.0.3, ...): the
 * gateway sees each such address as another client, as it would see hosts on a network.
 * `agent`: connections kept alive for this address only (the bench's fleet); `signal` aborts.
 */
export function requestFrom(
  localAddress: string,
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: string;
    agent?: Agent;
    signal?: AbortSignal;
  } = {},
): Promise<AddressedResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? 'GET',
        headers: options.headers,
        localAddress,
        // A connection of its own, so no kept-alive socket of another address is reused.
        agent: options.agent ?? false,
        signal: options.signal,
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const isJson = res.headers['content-type']?.startsWith('application/json') && text;
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            json: isJson ? (JSON.parse(text) as Record<string, unknown>) : {},
            text,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within 30 s`)));
    req.on('error', reject);
    req.end(options.body);
  });
}
