import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Sampler } from '@opentelemetry/sdk-trace';
import { VERSION } from '../release/version.ts';
import { currentTraceScope, inTraceScope } from './trace-scope.ts';

/**
 * Optional OpenTelemetry tracing, exported as OTLP over HTTP. Off unless an endpoint is
 * configured: then nothing is created (call sites hold `Tracing | undefined` and skip it), and
 * the SDK is not even loaded.
 */
export interface Tracing {
  /**
   * The server span of one request, continuing the client's W3C `traceparent` when it sent a
   * valid one (a malformed one starts a new trace). Ended with the response, or when the client
   * leaves before it has all of it (an error: `client left`).
   */
  serveRequest(req: IncomingMessage, res: ServerResponse, requestId: string): Span;
  /** A span under the current one (a root span outside any). */
  start(name: string, kind: 'client' | 'internal', attributes?: Attributes): Span;
  /** Runs `work(...args)` with `span` current: its spans are children, its requests name it. */
  within<A extends unknown[], R>(span: Span, work: (...args: A) => R, ...args: A): R;
  /** `traceparent` (and `tracestate`) naming `span`, as `[name, value, ...]`. */
  headersOf(span: Span): string[];
  /** Exports the spans still queued, then stops. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** Where spans go: an OTLP/HTTP traces endpoint, e.g. `http://collector:4318/v1/traces`. */
  url: string;
  /** Sent with every export (e.g. a vendor's API key). */
  headers: Record<string, string>;
  serviceName: string;
  /** Share of traces kept, 0 to 1, decided on the trace id. */
  sampleRatio: number;
  logger: Logger;
}

/**
 * Where spans go, from the configuration: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else
 * `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces` (OpenTelemetry's rule); undefined: tracing off.
 */
export function tracesUrlOf(config: {
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
}): string | undefined {
  if (config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return config.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  return config.OTEL_EXPORTER_OTLP_ENDPOINT && `${config.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`;
}

/** The status message of a request span whose client left before it had its whole answer. */
const CLIENT_LEFT = 'client left';

/** Ends `span`; a failure marks it as an error, named by its result code when it has one. */
export function endSpan(span: Span, failure?: unknown): void {
  if (failure !== undefined) {
    // A result code (`503-11001`), a refusal reason or the error's class: never a message,
    // which may quote input.
    const { result, reason, name } = (failure ?? {}) as Record<string, unknown>;
    const message = [result, reason, name].find((v) => typeof v === 'string') ?? 'error';
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  }
  span.end();
}

/**
 * Starts the exporter. Sampling: the share `sampleRatio` of requests, whatever the client's
 * `traceparent` says (its trace id is kept, neither its sampled flag nor the id itself decides:
 * clients cannot make every request traced). Export problems are logged as warnings, never
 * thrown at requests.
 */
export async function createTracing(options: TracingOptions): Promise<Tracing> {
  const [sdk, { OTLPTraceExporter }, { resourceFromAttributes }, { W3CTraceContextPropagator }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/core'),
    ]);
  const logger = options.logger.child({ component: 'tracing' });
  diag.setLogger(
    {
      error: (message) => logger.warn(message),
      warn: (message) => logger.warn(message),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    DiagLogLevel.WARN,
  );
  const ratio = new sdk.TraceIdRatioBasedSampler(options.sampleRatio);
  // The ratio sampler keeps a trace id whose words XOR to a small number: an id the gateway
  // made is random, a client's is whatever it chose (`00...01` is kept at any ratio). A request
  // continuing a client's trace is kept at random instead, one draw per request.
  const perRequest: Sampler = {
    shouldSample: () => ({
      decision:
        Math.random() < options.sampleRatio
          ? sdk.SamplingDecision.RECORD_AND_SAMPLED
          : sdk.SamplingDecision.NOT_RECORD,
    }),
    toString: () => `PerRequestRatio{${options.sampleRatio}}`,
  };
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({
      'service.name': options.serviceName,
      'service.version': VERSION,
    }),
    sampler: new sdk.ParentBasedSampler({
      root: ratio,
      remoteParentSampled: perRequest,
      remoteParentNotSampled: perRequest,
    }),
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: options.url, headers: options.headers }),
      }),
    ],
  });
  const tracer = provider.getTracer('realmgate');
  const propagator = new W3CTraceContextPropagator();

  const headersOf = (span: Span): string[] => {
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
    return Object.entries(carrier).flat();
  };
  const within = <A extends unknown[], R>(span: Span, work: (...args: A) => R, ...args: A): R =>
    inTraceScope(
      { context: trace.setSpan(ROOT_CONTEXT, span), headers: () => headersOf(span) },
      work,
      ...args,
    );

  return {
    serveRequest(req, res, requestId) {
      const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
      const span = tracer.startSpan(
        req.method ?? 'HTTP',
        {
          kind: SpanKind.SERVER,
          attributes: { 'http.request.method': req.method, 'realmgate.request_id': requestId },
        },
        parent,
      );
      // Not sampled: nothing will be exported, so nothing more to record.
      if (!span.isRecording()) return span;
      // 'close', not 'finish': a client that leaves before its answer (often one kept waiting
      // by a slow dependency) ends the span too, or its children would have no parent.
      res.on('close', () => {
        const url = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '';
        // The path only: a query may carry anything.
        span.setAttribute('url.path', url.split('?', 1)[0]!);
        if (res.headersSent) span.setAttribute('http.response.status_code', res.statusCode);
        if (!res.writableFinished)
          span.setStatus({ code: SpanStatusCode.ERROR, message: CLIENT_LEFT });
        else if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      });
      return span;
    },
    start(name, kind, attributes) {
      return tracer.startSpan(
        name,
        { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes },
        currentTraceScope()?.context ?? ROOT_CONTEXT,
      );
    },
    within,
    headersOf,
    shutdown: () => provider.shutdown(),
  };
}
