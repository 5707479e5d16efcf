/**
 * Why a request through a proxy (`/auth` to Keycloak, the forwarded route to the automation
 * service) failed, each cause once: the label values of `realmgate_proxy_failures_total`, and,
 * through `NETWORK_ERRORS`, what the translations of Keycloak's and the automation service's
 * failures read (keycloak-failures.ts).
 */
export const PROXY_FAILURE_CAUSES = [
  /** The upstream refused the connection (ECONNREFUSED): nothing sent. */
  'refused',
  /** Its name did not resolve, or no route led to it: nothing sent. */
  'unreachable',
  /** Its connection broke: reset or closed before or during its answer. */
  'reset',
  /** Silent for the proxy's timeout (connecting, or between bytes). */
  'timeout',
  /** Its answer still coming at the answer's deadline (PROXY_ANSWER_DEADLINE_SECONDS). */
  'deadline',
  /** It answered 100 or 101 unasked (forward.ts `UpstreamUnaskedInterim`). */
  'unasked_interim',
  /** Anything else it sent that was not HTTP the proxy could relay. */
  'bad_answer',
  /** Not sent: the client's address held its share of the pool (429). */
  'over_share',
] as const;
export type ProxyFailureCause = (typeof PROXY_FAILURE_CAUSES)[number];

/** The upstreams a proxy sends to: the `upstream` label. */
export const PROXY_UPSTREAMS = ['keycloak', 'automation'] as const;
export type ProxyUpstream = (typeof PROXY_UPSTREAMS)[number];

/** The causes an error of the exchange names (the pool share's refusal is no error). */
export type NetworkCause = Exclude<ProxyFailureCause, 'over_share'>;

/** Counts a proxy's failures; cheap enough for any request (an array increment). */
export interface ProxyMetrics {
  proxyFailure(upstream: ProxyUpstream, cause: ProxyFailureCause): void;
}

/**
 * The network errors a request to an upstream can end with (Node's sockets and DNS, undici,
 * the gateway's own timers), each once: its cause, and whether it struck while the connection
 * was being made, so that no byte of the request reached the upstream.
 */
export const NETWORK_ERRORS: Readonly<
  Record<string, { cause: NetworkCause; beforeSending: boolean }>
> = {
  ECONNREFUSED: { cause: 'refused', beforeSending: true },
  // DNS, and no route to the host.
  ENOTFOUND: { cause: 'unreachable', beforeSending: true },
  EAI_AGAIN: { cause: 'unreachable', beforeSending: true },
  EHOSTUNREACH: { cause: 'unreachable', beforeSending: true },
  EHOSTDOWN: { cause: 'unreachable', beforeSending: true },
  ENETUNREACH: { cause: 'unreachable', beforeSending: true },
  ENETDOWN: { cause: 'unreachable', beforeSending: true },
  EADDRNOTAVAIL: { cause: 'unreachable', beforeSending: true },
  ECONNRESET: { cause: 'reset', beforeSending: false },
  EPIPE: { cause: 'reset', beforeSending: false },
  // undici: the other side closed the connection before or while answering.
  UND_ERR_SOCKET: { cause: 'reset', beforeSending: false },
  UND_ERR_CLOSED: { cause: 'reset', beforeSending: false },
  // Timeouts, the gateway's (AbortSignal.timeout, a socket timeout, forward.ts `UpstreamSilent`)
  // or a client library's.
  UND_ERR_CONNECT_TIMEOUT: { cause: 'timeout', beforeSending: true },
  ETIMEDOUT: { cause: 'timeout', beforeSending: false },
  ESOCKETTIMEDOUT: { cause: 'timeout', beforeSending: false },
  UND_ERR_HEADERS_TIMEOUT: { cause: 'timeout', beforeSending: false },
  UND_ERR_BODY_TIMEOUT: { cause: 'timeout', beforeSending: false },
  ERR_JWKS_TIMEOUT: { cause: 'timeout', beforeSending: false },
  // forward.ts: the answer's deadline passed (`UpstreamSilent` of the deadline).
  UPSTREAM_ANSWER_DEADLINE: { cause: 'deadline', beforeSending: false },
  // forward.ts: the upstream answered 100 or 101 unasked.
  UPSTREAM_UNASKED_INTERIM: { cause: 'unasked_interim', beforeSending: false },
};

/** The entry of `NETWORK_ERRORS` an error's `code` names, if any. */
export function networkErrorOf(error: object) {
  const { code } = error as { code?: unknown };
  return typeof code === 'string' && Object.hasOwn(NETWORK_ERRORS, code)
    ? NETWORK_ERRORS[code]
    : undefined;
}

/** The error itself, then its `cause` chain (fetch and undici wrap socket errors), an
 * AggregateError's first error (connection attempts to several addresses), five deep at most. */
export function* errorChain(err: unknown): Generator<object> {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    yield current;
    current =
      current instanceof AggregateError && current.errors.length > 0
        ? current.errors[0]
        : (current as { cause?: unknown }).cause;
  }
}

/** The cause of a proxy's failure, read through `errorChain`: what no entry names is a bad answer. */
export function proxyFailureCauseOf(err: Error): NetworkCause {
  for (const current of errorChain(err)) {
    const network = networkErrorOf(current);
    if (network) return network.cause;
  }
  return 'bad_answer';
}
