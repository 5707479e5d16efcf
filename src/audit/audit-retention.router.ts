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

/** An administrator's change, which may name a deleted organization's records by `from`. */
export const administratorsChange = retentionBody
  .extend({
    from: z.number().int().min(1).optional().meta({
      description:
        "the first record (`seq`) of a deleted organization's records, as `deleted` lists them: their days are set, not those of the organization that has the id now",
    }),
  })
  .meta({ id: 'AuditRetentionChangeOfOrganization' });

const deletedStretch = z
  .object({
    from: z.number().int().meta({ description: 'the first record (`seq`) of its records' }),
    until: z.number().int().meta({ description: 'the first record after them' }),
    days: z.number().int(),
    chosen: z.boolean(),
  })
  .meta({ id: 'AuditDeletedRetention' });

const retention = z
  .object({
    days: z.number().int().meta({ description: 'days a record of this log is kept' }),
    chosen: z.boolean().meta({
      description: "the log's own choice (else the platform's default, `AUDIT_RETENTION_DAYS`)",
    }),
    minDays: z.number().int().meta({ description: 'the fewest days a choice may be' }),
    maxDays: z.number().int().meta({ description: 'the most days a choice may be' }),
    deleted: z.array(deletedStretch).optional().meta({
      description:
        "Platform administrators only: the organizations deleted before under this id, oldest first, each with its records' days (kept by its own choice, never the new organization's)",
    }),
  })
  .meta({ id: 'AuditRetention' });

async function retentionOf(service: AuditLogService, log: string, whole: boolean) {
  const { choices, bounds, deleted } = service.retention;
  const own = await choices.of(log);
  const before = whole ? await deleted.of(log) : [];
  return {
    days: daysKept(own, bounds),
    chosen: own !== undefined,
    minDays: bounds.minDays,
    maxDays: bounds.maxDays,
    ...(before.length > 0 && {
      deleted: before.map(({ from, until, days }) => ({
        from,
        until,
        days: daysKept(days, bounds),
        chosen: days !== undefined,
      })),
    }),
  };
}

function retentionRoutes(variant: RealmVariant): AnyRoute<AuditLogService>[] {
  const path = `${variant.base}/audit-log/retention`;
  const { whose, operation, errors, callers: description } = logVariant(variant);
  // Administrators' variant of an organization: its deleted organizations' records too.
  const whole = variant.base.includes('organizations');
  const target = ({ realm, sent }: { realm: string; sent: unknown }) => {
    const { days, from } = (sent ?? {}) as { days?: unknown; from?: unknown };
    return {
      ...logTarget({ realm }),
      ...(typeof days === 'number' ? { days: String(days) } : {}),
      ...(typeof from === 'number' ? { from: String(from) } : {}),
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
      beyondWorkspaces: true,
      params: variant.params,
      data: retention,
      errors,
      handler: async (service, { principal, realm }) => {
        await allowRead(service, principal, realm);
        return retentionOf(service, realm, whole);
      },
    }),
    route({
      method: 'put',
      path,
      operationId: `setAuditRetention${operation}`,
      summary: `Choose how long ${whose} audit log is kept, within the platform's bounds`,
      description: `${description} Records older than that are removed within the hour, up to a checkpoint: what remains still verifies. The change is recorded in the log.${whole ? " With `from`, the days of a deleted organization's records (as `deleted` lists them)." : ''}`,
      tags: ['audit'],
      beyondWorkspaces: true,
      params: variant.params,
      body: whole ? administratorsChange : retentionBody,
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
        const from = (body as { from?: number }).from;
        if (from === undefined) await service.retention.choices.set(realm, body.days);
        else if (!(await service.retention.deleted.set(realm, from, body.days))) {
          throw new AppError('badRequestBody', {
            message: `from: no deleted organization's records begin at ${from} (see \`deleted\`)`,
            data: null,
          });
        }
        return retentionOf(service, realm, whole);
      },
    }),
  ];
}

/** Master's retention, an organization's by administrators, and by its own audit administrators. */
export const auditRetentionRoutes = [...administeredRealms, callerRealms[1]!].flatMap(
  retentionRoutes,
);
