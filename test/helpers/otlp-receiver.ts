import { createServer } from 'node:http';
import { closeServers, listenLocally } from './local-server.ts';

/** One span as an OTLP/HTTP JSON export carries it (ids in hex), with its resource's service. */
export interface ReceivedSpan {
  service: string;
  /** The resource's `service.version`. */
  serviceVersion: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
}

/** One log record as an OTLP/HTTP JSON logs export carries it, with its resource's service. */
export interface ReceivedLog {
  service: string;
  eventName: string;
  /** Epoch ms (OTLP's nanoseconds divided). */
  timeMs: number;
  severityNumber: number;
  body: unknown;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** Base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` names it; exports arrive at `/v1/traces`, `/v1/logs`. */
  url: string;
  /** Every span received so far, in order. */
  spans: ReceivedSpan[];
  /** Every log record received so far, in order. */
  logs: ReceivedLog[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean };
interface LogsExportRequest {
  resourceLogs?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeLogs?: {
      logRecords?: {
        eventName?: string;
        timeUnixNano?: string | number;
        severityNumber?: number;
        body?: AnyValue;
        attributes?: { key: string; value: AnyValue }[];
      }[];
    }[];
  }[];
}
interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeSpans?: {
      spans?: (Omit<ReceivedSpan, 'service' | 'attributes' | 'status'> & {
        attributes?: { key: string; value: AnyValue }[];
        status?: { code?: number };
      })[];
    }[];
  }[];
}

const valueOf = (v: AnyValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue);
const attributesOf = (list: { key: string; value: AnyValue }[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]));

/**
 * A tiny OTLP/HTTP traces endpoint (JSON, what the exporter sends by default): records the
 * spans of every export it gets, for tests that show what the gateway traces.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const logs: ReceivedLog[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/logs') {
        logs.push(
          ...logsOf(JSON.parse(Buffer.concat(chunks).toString('utf8')) as LogsExportRequest),
        );
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest;
      for (const resource of body.resourceSpans ?? []) {
        const resourceAttributes = attributesOf(resource.resource?.attributes);
        const service = String(resourceAttributes['service.name']);
        const serviceVersion = String(resourceAttributes['service.version']);
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              service,
              serviceVersion,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? '',
              name: span.name,
              kind: span.kind,
              attributes: attributesOf(span.attributes),
              status: span.status?.code ?? 0,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  return { url: await listenLocally(server), spans, logs, close: () => closeServers(server) };
}

function logsOf(body: LogsExportRequest): ReceivedLog[] {
  const received: ReceivedLog[] = [];
  for (const resource of body.resourceLogs ?? []) {
    const service = String(attributesOf(resource.resource?.attributes)['service.name']);
    for (const scope of resource.scopeLogs ?? []) {
      for (const record of scope.logRecords ?? []) {
        received.push({
          service,
          eventName: record.eventName ?? '',
          timeMs: Number(BigInt(record.timeUnixNano ?? 0) / 1_000_000n),
          severityNumber: record.severityNumber ?? 0,
          body: record.body && valueOf(record.body),
          attributes: attributesOf(record.attributes),
        });
      }
    }
  }
  return received;
}
