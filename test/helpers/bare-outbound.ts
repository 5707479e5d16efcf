import { createLogger } from '../../src/http/logger.ts';
import type { Outbound } from '../../src/outbound/forward.ts';
import type { Upstream } from '../../src/outbound/upstream.ts';

/**
 * What the relay's unit tests tell `forward` of one request: `/` on `upstream` from loopback, no
 * credentials kept, none of the gateway's own headers, nothing traced, nothing logged. `given`
 * names what the tests read (the request id their answers carry, the silence's timeout) and
 * overrides the rest.
 */
export function bareOutbound(
  upstream: Upstream,
  given: Partial<Outbound> & Pick<Outbound, 'requestId' | 'timeoutMs'>,
): Outbound {
  return {
    upstream,
    path: '/',
    client: '127.0.0.1',
    keepCredentials: false,
    headers: [],
    trace: undefined,
    logger: createLogger('silent'),
    ...given,
  };
}
