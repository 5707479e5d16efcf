import type { RequestHandler } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { ApiOutcomeListener } from '../edge/edge.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { Audit } from '../http/audit.ts';
import type { ReadinessCheck } from '../http/health.router.ts';
import type { Tenants } from '../platform/platform.area.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Clock } from '../time/clock.ts';
import { apiDecisionOf } from './api-decisions.ts';
import { createAuditLogRepo } from './audit-log.repo.ts';
import type { AuditLogService } from './audit-log.router.ts';
import { changeEventsOf } from './change-events.ts';
import { createAuditWriter, type AuditMetrics, type AuditWriter } from './audit-writer.ts';
import { scheduleRetention } from './audit-retention.ts';
import { auditTokenGrants } from './token-grants.ts';

export interface AuditLogArea {
  /** Told of each `/api` request's outcome by the edge; undefined when the log is off. */
  apiOutcomes: ApiOutcomeListener | undefined;
  /** The token endpoint's step recording each grant; undefined when the log is off. */
  tokenGrants: RequestHandler | undefined;
  /** What the reader's routes are served with (audit-log.router.ts). */
  service: AuditLogService;
  /** The one writer of this process's records; undefined when the log is off. */
  writer: AuditWriter | undefined;
  /** Writes what is spooled, for up to `graceMs`; the last thing before the database closes. */
  close(graceMs: number): Promise<void>;
}

/**
 * The audit log (docs/audit.md): the writer of this process, what records the `/api`
 * decisions (through the edge), the token grants (a step of `/auth`) and the changes (every
 * audit line, http/audit.ts), and its readiness.
 */
export function buildAuditLog(
  shared: {
    config: Config;
    logger: Logger;
    clock: Clock;
    db: Knex;
    forwarding: Forwarding;
    audit: Audit;
    readiness: Record<string, ReadinessCheck>;
    metrics: AuditMetrics;
  },
  tenants: Pick<Tenants, 'directory'>,
): AuditLogArea {
  const { config, clock, forwarding } = shared;
  const isLog = async (realm: string) =>
    realm === MASTER_REALM || (await tenants.directory.stateOf(realm)) !== 'absent';
  const service: AuditLogService = {
    repo: createAuditLogRepo(shared.db),
    organizationExists: isLog,
  };
  if (!config.AUDIT_LOG_ENABLED) {
    return {
      apiOutcomes: undefined,
      tokenGrants: undefined,
      service,
      writer: undefined,
      close: async () => {},
    };
  }
  const writer = createAuditWriter({
    db: shared.db,
    logger: shared.logger,
    metrics: shared.metrics,
    spoolMax: config.AUDIT_SPOOL_MAX_RECORDS,
    batchMax: config.AUDIT_BATCH_MAX_RECORDS,
    intervalMs: config.AUDIT_FLUSH_INTERVAL_MS,
  });
  const record = writer.record.bind(writer);
  shared.readiness.audit_log = () => writer.readiness();
  const retention = scheduleRetention({
    db: shared.db,
    days: config.AUDIT_RETENTION_DAYS,
    clock,
    intervalMs: 3600_000,
    logger: shared.logger,
  });
  shared.audit.keepIn((entry) => {
    for (const event of changeEventsOf(entry, clock.now())) record(event);
  });
  return {
    apiOutcomes: (req, res, scope) => {
      const event = apiDecisionOf(req, res, scope, forwarding.clientAddress(req), clock);
      if (event) record(event);
    },
    tokenGrants: auditTokenGrants({
      record,
      isLog,
      clientAddress: (req) => forwarding.clientAddress(req),
      clock,
    }),
    service,
    writer,
    close: (graceMs) => {
      retention.close();
      return writer.close(graceMs);
    },
  };
}
