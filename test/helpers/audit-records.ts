import type { Knex } from 'knex';
import { GENESIS_HASH, hashOf, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { createAuditWriter, type AuditEvent } from '../../src/audit/audit-writer.ts';
import { createLogger } from '../../src/http/logger.ts';

/** A log of `count` records chained as the gateway's writer chains them (unit tests). */
export function chainedLog(count: number, org = 'acme'): AuditRecord[] {
  const records: AuditRecord[] = [];
  let prevHash = GENESIS_HASH;
  for (let seq = 1; seq <= count; seq++) {
    const unhashed: Omit<AuditRecord, 'hash'> = {
      org,
      seq,
      at: new Date(Date.UTC(2026, 10, 1, 0, 0, seq)).toISOString(),
      action: 'api.request',
      outcome: seq % 3 ? 'success' : 'failure',
      actorRealm: org,
      actorId: `user-${seq}`,
      actorName: `alice${seq}`,
      credential: 'bearer',
      clientId: `_${org}-api`,
      jobCredential: null,
      jtiSha256: null,
      jkt: null,
      method: 'GET',
      route: '/api/{organization_id}/platform/workspaces',
      path: `/api/${org}/platform/workspaces`,
      workspace: null,
      status: 200,
      result: null,
      reason: null,
      address: '127.0.0.1',
      requestId: `r${seq}`,
      details: { b: 'two', a: ['one'] },
      prevHash,
    };
    records.push({ ...unhashed, hash: hashOf(unhashed) });
    prevHash = records.at(-1)!.hash;
  }
  return records;
}

/**
 * An `/api` decision of `org` at `atMs`, as the recording code hands it to the writer, with
 * `fields` as given.
 */
export function apiEvent(org: string, atMs: number, fields: Partial<AuditEvent> = {}): AuditEvent {
  return {
    org,
    atMs,
    action: 'api.request',
    outcome: 'success',
    actorRealm: org,
    actorId: null,
    actorName: 'alice',
    credential: 'bearer',
    clientId: null,
    jobCredential: null,
    jkt: null,
    method: 'GET',
    route: null,
    path: null,
    workspace: null,
    status: 200,
    result: null,
    reason: null,
    address: '127.0.0.1',
    requestId: null,
    details: {},
    ...fields,
  };
}

/**
 * The gateway's own writer on `db`, its counts dropped, writing only when flushed or closed:
 * records chained as the gateway chains them, for tests that need a log.
 */
export function quietWriter(db: Knex, spoolMax = 10_000) {
  return createAuditWriter({
    db,
    logger: createLogger('silent'),
    metrics: { auditRecords: () => undefined },
    spoolMax,
    batchMax: 2000,
    intervalMs: 60_000,
  });
}

/**
 * A large log written at once by PostgreSQL: `count` records of `org`, a second apart up to now,
 * and its head. Not chained (placeholder hashes): for tests of how long a log's reads and
 * exports hold their slots, not of what they say.
 */
export async function insertLargeLog(db: Knex, org: string, count: number): Promise<void> {
  await db.raw(
    `insert into audit_log (org, seq, at, action, outcome, actor_realm, actor_id, actor_name,
       method, route, path, status, details, prev_hash, hash)
     select ?, g, now() - interval '1 second' * (? - g), 'api.request', 'success', ?, 'u1',
       'someone', 'GET', '/api/x', '/api/x', 200, '{}'::jsonb, 'p', 'h'
     from generate_series(1, ?) g`,
    [org, count, org, count],
  );
  await db('audit_log_heads').insert({ org, seq: count, hash: 'h' });
}
