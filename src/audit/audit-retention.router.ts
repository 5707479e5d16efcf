import { z } from 'zod';
import { AppError } from '../envelope/errors.ts';
import { routeFor, type AnyRoute } from '../http/route-table.ts';
import { administeredRealms, callerRealms, type RealmVariant } from '../platform/path-ids.ts';
import { allowRead, logVariant, logTarget, type AuditLogService } from './audit-log.router.ts';
import { daysKept } from './audit-retention.ts';

const route = routeFor<AuditLogService>({ metricsClass: 'provisioning' });

export const retentionBody = z
  .object({
    days: z
      .number()
      .int()
      .min(1)
      .max(36500)
      .meta({ description: 'days a record is kept; within `minDays` and `maxDays`' }),
  })
  .strict()
  .meta({ id: 'AuditRetentionChange' });

const retention = z
  .object({
    days: z.number().int().meta({ description: 'days a record of this log is kept' }),
    chosen: z.boolean().meta({
      description: "the log's own choice (else the platform's default, `AUDIT_RETENTION_DAYS`)",
    }),
    minDays: z.number().int().meta({ description: 'the fewest days a choice may be' }),
    maxDays: z.number().int().meta({ description: 'the most days a choice may be' }),
  })
  .meta({ id: 'AuditRetention' });

async function retentionOf(service: AuditLogService, log: string) {
  const { choices, bounds } = service.retention;
  const own = await choices.of(log);
  return {
    days: daysKept(own, bounds),
    chosen: own !== undefined,
    minDays: bounds.minDays,
    maxDays: bounds.maxDays,
  };
}

function retentionRoutes(variant: RealmVariant): AnyRoute<AuditLogService>[] {
  const path = `${variant.base}/audit-log/retention`;
  const { whose, operation, errors, callers: description } = logVariant(variant);
  const target = ({ realm, sent }: { realm: string; sent: unknown }) => {
    const days = (sent as { days?: unknown } | undefined)?.days;
    return {
      ...logTarget({ realm }),
      ...(typeof days === 'number' ? { days: String(days) } : {}),
    };
  };
  return [
    route({
      method: 'get',
      path,
      operationId: `getAuditRetention${operation}`,
      summary: `How long ${whose} audit log is kept, and the bounds of a choice`,
      description,
      tags: ['audit'],
      params: variant.params,
      data: retention,
      errors,
      handler: async (service, { principal, realm }) => {
        await allowRead(service, principal, realm);
        return retentionOf(service, realm);
      },
    }),
    route({
      method: 'put',
      path,
      operationId: `setAuditRetention${operation}`,
      summary: `Choose how long ${whose} audit log is kept, within the platform's bounds`,
      description: `${description} Records older than that are removed within the hour, up to a checkpoint: what remains still verifies. The change is recorded in the log.`,
      tags: ['audit'],
      params: variant.params,
      body: retentionBody,
      data: retention,
      errors,
      audit: { action: 'audit_log.retention.change', target },
      handler: async (service, { principal, realm, body }) => {
        await allowRead(service, principal, realm);
        const { minDays, maxDays } = service.retention.bounds;
        if (body.days < minDays || body.days > maxDays) {
          throw new AppError('badRequestBody', {
            message: `days: must be from ${minDays} to ${maxDays} (the platform's bounds)`,
            data: null,
          });
        }
        await service.retention.choices.set(realm, body.days);
        return retentionOf(service, realm);
      },
    }),
  ];
}

/** Master's retention, an organization's by administrators, and by its own audit administrators. */
export const auditRetentionRoutes = [...administeredRealms, callerRealms[1]!].flatMap(
  retentionRoutes,
);
