import { createHash } from 'node:crypto';
import { SeverityNumber, type Attributes } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { VERSION } from '../release/version.ts';
import type { AuditEvent } from './audit-writer.ts';

/** Sends audit records as OpenTelemetry log records too (AUDIT_OTEL_LOGS). */
export interface OtelDelivery {
  /** Queues one record; sent in the next batch. Never waits, never throws. */
  deliver(event: AuditEvent): void;
  /** Sends what is queued, then stops. */
  close(): Promise<void>;
}

/** Where the records go: the collector of the traces, OTLP/HTTP's logs path. */
export function logsUrlOf(config: {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
}): string | undefined {
  return config.OTEL_EXPORTER_OTLP_ENDPOINT && `${config.OTEL_EXPORTER_OTLP_ENDPOINT}/v1/logs`;
}

/** A record's fields as attributes: the same chosen fields the log keeps, nothing else. */
export function attributesOf(event: AuditEvent): Attributes {
  const attributes: Attributes = {
    'realmgate.audit.org': event.org,
    'realmgate.audit.action': event.action,
    'realmgate.audit.outcome': event.outcome,
  };
  const optional: [string, string | number | null][] = [
    ['realmgate.audit.actor.realm', event.actorRealm],
    ['realmgate.audit.actor.id', event.actorId],
    ['realmgate.audit.actor.name', event.actorName],
    ['realmgate.audit.credential', event.credential],
    ['realmgate.audit.client_id', event.clientId],
    ['realmgate.audit.job_credential', event.jobCredential],
    // As in the log: a token is known by the SHA-256 of its `jti`, never by the `jti` itself.
    ['realmgate.audit.jti_sha256', event.tokenId === undefined ? null : sha256(event.tokenId)],
    ['realmgate.audit.jkt', event.jkt],
    ['http.request.method', event.method],
    ['http.route', event.route],
    ['url.path', event.path],
    ['realmgate.audit.workspace', event.workspace],
    ['http.response.status_code', event.status],
    ['realmgate.audit.result', event.result],
    ['realmgate.audit.reason', event.reason],
    ['client.address', event.address],
    ['realmgate.request_id', event.requestId],
  ];
  for (const [name, value] of optional) if (value !== null) attributes[name] = value;
  for (const [name, value] of Object.entries(event.details)) {
    attributes[`realmgate.audit.details.${name}`] = value;
  }
  return attributes;
}

/**
 * The OTLP/HTTP logs exporter, loaded only when the delivery is on. Records are batched by the
 * SDK (at most 2,048 queued; more are dropped by it, and said in the gateway's log): the
 * database log is the record that counts, this a copy for a collector.
 */
export async function createOtelDelivery(options: {
  url: string;
  headers: Record<string, string>;
  serviceName: string;
  logger: Logger;
}): Promise<OtelDelivery> {
  const [
    { LoggerProvider, BatchLogRecordProcessor },
    { OTLPLogExporter },
    { resourceFromAttributes },
  ] = await Promise.all([
    import('@opentelemetry/sdk-logs'),
    import('@opentelemetry/exporter-logs-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const provider = new LoggerProvider({
    resource: resourceFromAttributes({
      'service.name': options.serviceName,
      'service.version': VERSION,
    }),
    processors: [
      new BatchLogRecordProcessor({
        exporter: new OTLPLogExporter({ url: options.url, headers: options.headers }),
      }),
    ],
  });
  const otel = provider.getLogger('realmgate.audit', VERSION);
  return {
    deliver(event) {
      try {
        otel.emit({
          eventName: 'realmgate.audit',
          timestamp: event.atMs,
          severityNumber: event.outcome === 'success' ? SeverityNumber.INFO : SeverityNumber.WARN,
          severityText: event.outcome === 'success' ? 'INFO' : 'WARN',
          body: event.action,
          attributes: attributesOf(event),
        });
      } catch (err) {
        options.logger.warn({ err }, 'audit log: an OpenTelemetry log record not sent');
      }
    },
    close: () => provider.shutdown(),
  };
}

function sha256(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
