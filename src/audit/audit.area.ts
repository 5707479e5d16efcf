import { createDeletedRetention } from './deleted-retention.ts';
import type { RequestHandler } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config/config.ts';
import type { ApiOutcomeListener } from '../edge/edge.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { Audit } from '../http/audit.ts';
import type { ReadinessCheck } from '../http/health.router.ts';
import type { KeycloakArea } from '../keycloak/keycloak.area.ts';
import type { Tenants } from '../platform/platform.area.ts';
import type { OrganizationBeginning } from '../platform/provisioning.service.ts';
import type { Clock } from '../time/clock.ts';
import { apiDecisionOf } from './api-decisions.ts';
import { createAuditLogRepo } from './audit-log.repo.ts';
import { createAuditIncarnations } from './audit-incarnations.ts';
import type { AuditLogService } from './audit-log.router.ts';
import { recordChanges } from './change-events.ts';
import { createAuditWriter, type AuditMetrics, type AuditWriter } from './audit-writer.ts';
import {
  createRetentionChoices,
  scheduleRetention,
  type RetentionBounds,
} from './audit-retention.ts';
import { createOtelDelivery, logsUrlOf } from './otel-delivery.ts';
import { pullKeycloakEvents } from './keycloak-events.area.ts';
import { REALM_EVENTS_SETTINGS } from './keycloak-event-records.ts';
import type { KeycloakEventMetrics, KeycloakEventPullDeps } from './keycloak-event-pull.ts';
import { auditTokenGrants } from './token-grants.ts';
import { auditAuthRefusals } from './auth-refusals.ts';
import { pendingLookups, realmLogCheck, type RealmLogDeps } from './realm-log.ts';
import type { TokenReachRefusalListener } from '../auth-proxy/token-reach-guard.ts';
import type { SessionTokenCheck } from '../auth/bearer/session-token.ts';
import { summariseRefusals } from './refusal-summaries.ts';
import type { AuditDownloadService } from './download-jobs.router.ts';
import { createDownloadJobs, runDownloadJobs } from './download-jobs.ts';
import { createLongReads } from './long-reads.ts';
import { auditKeysRouter } from './audit-keys.router.ts';
import { createCheckpointer, scheduleCheckpoints } from './audit-checkpointer.ts';
import { storedCheckpoints } from './audit-export-signed.ts';
import { openCheckpointSigner, publishedKeys } from './audit-signing-key.ts';
import type { CheckpointSigner } from './audit-checkpoints.ts';
import { within } from '../time/within.ts';
import type { Periodic } from '../time/every.ts';

/** How often every replica looks for download jobs another replica took but did not run. */
const DOWNLOAD_POLL_MS = 5000;

export interface AuditLogArea {
  /** Told of each `/api` request's outcome by the edge; undefined when the log is off. */
  apiOutcomes: ApiOutcomeListener | undefined;
  /** The token endpoint's step recording each grant; undefined when the log is off. */
  tokenGrants: RequestHandler | undefined;
  /** Records each refusal of `/auth`'s reach step, but a grant's; undefined when the log is off. */
  authRefusals: TokenReachRefusalListener | undefined;
  /** What the reader's routes are served with (audit-log.router.ts). */
  service: AuditLogService;
  /** What the reference platform's download routes are served with (download-jobs.router.ts). */
  downloads: AuditDownloadService;
  /** An organization created (again): its readers' log begins with it (audit-incarnations.ts). */
  organizationBegins: OrganizationBeginning;
  /**
   * The events settings a new organization's realm is made with (REALM_EVENTS_SETTINGS), so that
   * Keycloak saves its events from its creation, not from its first pull (up to
   * AUDIT_KEYCLOAK_EVENTS_SECONDS later); undefined when they are not pulled.
   */
  realmEvents: Readonly<Record<string, unknown>> | undefined;
  /** The public keys of checkpoints at `/.well-known/audit-keys`, on both listeners. */
  keys: RequestHandler;
  /** The one writer of this process's records; undefined when the log is off. */
  writer: AuditWriter | undefined;
  /** Writes what is spooled, for up to `graceMs`; the last thing before the database closes. */
  close(graceMs: number): Promise<void>;
}

/**
 * The audit log (docs/audit.md): the writer of this process, what records the `/api`
 * decisions (through the edge), the token grants and the other refusals of `/auth` (its steps)
 * and the changes (every audit line, http/audit.ts), and its readiness.
 */
export async function buildAuditLog(
  shared: {
    config: Config;
    logger: Logger;
    clock: Clock;
    db: Knex;
    forwarding: Forwarding;
    audit: Audit;
    readiness: Record<string, ReadinessCheck>;
    metrics: AuditMetrics & KeycloakEventMetrics;
  },
  tenants: Pick<Tenants, 'directory' | 'organizationsRepo'>,
  keycloak: Pick<KeycloakArea, 'calls' | 'adminSession'>,
  auth: {
    /**
     * Told each realm's Keycloak events as they are pulled (auth: credential changes), also
     * while the log is off.
     */
    keycloakEventsSeen?: KeycloakEventPullDeps['seen'];
    /** Whether a token refused on `/auth` is its session's realm's (who it names). */
    sessionTokens: SessionTokenCheck;
  },
): Promise<AuditLogArea> {
  const { config, clock, forwarding } = shared;
  const { keycloakEventsSeen } = auth;
  const realmEvents =
    config.AUDIT_KEYCLOAK_EVENTS_SECONDS > 0 && (config.AUDIT_LOG_ENABLED || keycloakEventsSeen)
      ? REALM_EVENTS_SETTINGS
      : undefined;
  const isLog = realmLogCheck(tenants.directory);
  // Published even while the log is off: exports made before still verify.
  const keys = publishedKeys({
    db: shared.db,
    clock,
    signingKey: config.AUDIT_SIGNING_KEY,
    previousKeys: config.AUDIT_SIGNING_PREVIOUS_KEYS,
  });
  const incarnations = createAuditIncarnations(shared.db);
  const longReads = createLongReads(config.AUDIT_EXPORT_CONCURRENCY);
  // Aborted at close, once the listeners have closed: the exports' and download jobs' reads
  // still running serve nobody, and would hold the database's close for up to the spared timeout.
  const reading = new AbortController();
  const signer = signerOnce(() =>
    openCheckpointSigner({ db: shared.db, clock, signingKey: config.AUDIT_SIGNING_KEY }),
  );
  const service: AuditLogService = {
    repo: createAuditLogRepo(shared.db, reading.signal),
    organizationExists: isLog,
    firstSeqOf: (org) => incarnations.firstSeqOf(org),
    signatures: config.AUDIT_LOG_ENABLED
      ? { keys, ...storedCheckpoints(shared.db), signer, now: () => clock.now() }
      : undefined,
    retention: {
      choices: createRetentionChoices(shared.db),
      bounds: retentionBoundsOf(config),
      deleted: createDeletedRetention(shared.db),
    },
    longReads,
    // A client holding an export back is one holding a proxied answer back: the same bound.
    stallMs: config.PROXY_ANSWER_DEADLINE_SECONDS * 1000,
    now: () => clock.now(),
  };
  // Downloads serve what the log holds, written or not by this process (as reading does), also
  // while the log is off; only the poll for jobs other replicas left is the log's.
  const jobs = createDownloadJobs(shared.db, clock, shared.logger, longReads, reading.signal);
  const runner = runDownloadJobs(jobs, {
    pollMs: config.AUDIT_LOG_ENABLED ? DOWNLOAD_POLL_MS : undefined,
    logger: shared.logger,
  });
  const downloads: AuditDownloadService = { ...service, jobs, kick: () => runner.kick() };
  // Also while the log is off: the records it holds are the deleted organization's.
  const begin = (org: string, trx: Knex) => incarnations.begin(org, new Date(clock.now()), trx);
  if (!config.AUDIT_LOG_ENABLED) {
    // The auth area's use of the events does not wait for the log; no record is made of them.
    const keycloakEvents = pullKeycloakEvents(shared, tenants, keycloak, {
      seen: keycloakEventsSeen,
    });
    return {
      apiOutcomes: undefined,
      tokenGrants: undefined,
      authRefusals: undefined,
      service,
      downloads,
      organizationBegins: { settle: () => Promise.resolve(), begin },
      realmEvents,
      keys: auditKeysRouter(keys),
      writer: undefined,
      close: async () => {
        reading.abort();
        await runner.close();
        await keycloakEvents.stop();
      },
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
  const otel = config.AUDIT_OTEL_LOGS
    ? await createOtelDelivery({
        url: logsUrlOf(config)!,
        headers: config.OTEL_EXPORTER_OTLP_HEADERS ?? {},
        serviceName: config.OTEL_SERVICE_NAME,
        logger: shared.logger,
      })
    : undefined;
  // Every record goes to the database log and, when the delivery is on, to the collector; one
  // the spool refuses too: the copy is all that is left of it.
  const record: AuditWriter['record'] = otel
    ? (event) => {
        const taken = writer.record(event);
        otel.deliver(event);
        return taken;
      }
    : writer.record.bind(writer);
  // But a Keycloak event the spool refuses is offered again (by the same pull once the spool is
  // written, else by the next: its cursor stays before it): no loss, and delivered once taken,
  // it reaches the collector once.
  const offerPulled: AuditWriter['offer'] = otel
    ? (event) => {
        const taken = writer.offer(event);
        if (taken) otel.deliver(event);
        return taken;
      }
    : writer.offer.bind(writer);
  shared.readiness.audit_log = () => writer.readiness();
  const retention = scheduleRetention({
    db: shared.db,
    bounds: retentionBoundsOf(config),
    clock,
    intervalMs: 3600_000,
    logger: shared.logger,
  });
  // Opened now, so that its public key is published before its first checkpoint needs it; the
  // first checkpoint tries again if the database refused.
  void signer().catch(() => undefined);
  const checkpoints = scheduleCheckpoints(
    createCheckpointer({
      db: shared.db,
      signer,
      clock,
      period: {
        records: config.AUDIT_CHECKPOINT_RECORDS,
        ms: config.AUDIT_CHECKPOINT_SECONDS * 1000,
      },
    }),
    // Often enough that a log is signed soon after it is due, by whichever replica looks first.
    Math.min(config.AUDIT_CHECKPOINT_SECONDS * 1000, CHECKPOINT_POLL_MS),
    shared.logger,
  );
  const keycloakEvents = pullKeycloakEvents(shared, tenants, keycloak, {
    writer: { offer: offerPulled, flush: () => writer.flush() },
    seen: keycloakEventsSeen,
  });
  // A flood of refusals or failed grants from one address is counted past its first few
  // (refusal-summaries.ts).
  const refusals = summariseRefusals(record, clock);
  // The records of grants, `/auth` refusals and changes that wait for a lookup (realm-log.ts).
  const pending = pendingLookups();
  const realmLog: RealmLogDeps = {
    record: (event) => refusals.record(event),
    isLog,
    pending,
    clientAddress: (req) => forwarding.clientAddress(req),
    clock,
  };
  const isKnown = (organization: string) => tenants.directory.isKnown(organization);
  shared.audit.keepIn(recordChanges({ record, isLog, pending, now: () => clock.now() }));
  return {
    apiOutcomes: (req, res, scope) => {
      const event = apiDecisionOf(req, res, scope, forwarding.clientAddress(req), clock, isKnown);
      if (event) refusals.record(event);
    },
    tokenGrants: auditTokenGrants(realmLog),
    authRefusals: auditAuthRefusals({ ...realmLog, signedBy: auth.sessionTokens }),
    service,
    downloads,
    // The deleted organization's last records (its delete among them) may still be spooled
    // here, and the summaries of its refusals still counted (a minute's window): written first,
    // they stay before the new organization's first record, out of its readers' reach. Another
    // process's spool is not: docs/audit.md, "An organization id used again".
    organizationBegins: {
      settle: (org) => {
        refusals.closeLog(org);
        return writer.flush();
      },
      begin,
    },
    realmEvents,
    keys: auditKeysRouter(keys),
    writer,
    close: async (graceMs) => {
      reading.abort();
      await closeAuditWithin(graceMs, {
        background: [retention, checkpoints],
        sources: [
          () => runner.close(),
          () => keycloakEvents.stop(),
          // Before the summaries: a grant's or refusal's record goes through them.
          () => pending.settled(),
          () => refusals.close(),
        ],
        writer,
      });
      await otel?.close();
    },
  };
}

/**
 * The audit log's part of a shutdown, within `graceMs` as a whole (an orchestrator kills the
 * process a few seconds past the grace period, the spool unwritten and its loss untold): the
 * background work (a prune, a checkpoint) told to stop at once, what records into the writer
 * (`sources`) stopped in order within the first half of it (a download or a Keycloak pull that
 * does not end must not leave the writer no time), then the writer's spool written while the
 * background work ends, both within what is left of the grace period.
 */
export async function closeAuditWithin(
  graceMs: number,
  parts: {
    background: Periodic[];
    sources: (() => Promise<unknown>)[];
    writer: AuditWriter;
  },
): Promise<void> {
  // A prune or a checkpoint in progress commits the step it is in (each a transaction of
  // its own) and begins no other, so the pool does not close under a prune's next step; a
  // step still running past the grace period holds its connection, which the pool's close
  // waits for (or the orchestrator's kill rolls it back), never half done.
  const deadline = Date.now() + graceMs;
  const stopped = Promise.all(parts.background.map((work) => work.stop()));
  const sourcesDeadline = deadline - graceMs / 2;
  for (const stop of parts.sources) {
    await within(stop(), Math.max(0, sourcesDeadline - Date.now()), () => undefined);
  }
  const left = Math.max(0, deadline - Date.now());
  await Promise.all([within(stopped, left, () => undefined), parts.writer.close(left)]);
}

/** How often each replica looks for logs due a checkpoint, at most. */
const CHECKPOINT_POLL_MS = 5000;

/** `open` once it succeeds; tried again on the next call when it failed (the database down). */
function signerOnce(open: () => Promise<CheckpointSigner>): () => Promise<CheckpointSigner> {
  let opened: Promise<CheckpointSigner> | undefined;
  return () => {
    opened ??= open().catch((err: unknown) => {
      opened = undefined;
      throw err;
    });
    return opened;
  };
}

function retentionBoundsOf(config: Config): RetentionBounds {
  return {
    defaultDays: config.AUDIT_RETENTION_DAYS,
    minDays: config.AUDIT_RETENTION_MIN_DAYS,
    maxDays: config.AUDIT_RETENTION_MAX_DAYS,
  };
}
