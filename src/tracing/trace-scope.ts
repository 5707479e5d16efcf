import { AsyncLocalStorage } from 'node:async_hooks';
import type { Context } from '@opentelemetry/api';

/** What the traced work running now belongs to: its span's context, and how to name it. */
export interface TraceScope {
  readonly context: Context;
  /** W3C `traceparent` (and `tracestate`) naming the scope's span, as `[name, value, ...]`. */
  headers(): string[];
}

/** Entered only while tracing is on (tracing.ts): with tracing off nothing here ever runs. */
const current = new AsyncLocalStorage<TraceScope>();

/** Runs `work(...args)` inside `scope`: spans it starts are children of the scope's span. */
export function inTraceScope<A extends unknown[], R>(
  scope: TraceScope,
  work: (...args: A) => R,
  ...args: A
): R {
  return current.run(scope, work, ...args);
}

/** The scope of the traced work running now, if any. */
export function currentTraceScope(): TraceScope | undefined {
  return current.getStore();
}

/**
 * The `traceparent`/`tracestate` headers an outgoing request made now should carry (a Keycloak
 * call, an `/auth` request), as `[name, value, ...]`; undefined when nothing is traced.
 */
export function traceHeadersNow(): string[] | undefined {
  return current.getStore()?.headers();
}
