import { randomBytes } from 'node:crypto';
import { createAuditWriter } from '../../src/audit/audit-writer.ts';
import { createLogger } from '../../src/http/logger.ts';
import { testDb } from './platform.ts';

/**
 * Writes `count` successful Bearer requests into `org`'s log, a millisecond apart, through the
 * gateway's own writer (chained as the gateway chains them): a long log without `count`
 * requests.
 */
export async function writeRequests(org: string, count: number): Promise<void> {
  const writer = createAuditWriter({
    db: testDb(),
    logger: createLogger('silent'),
    metrics: { auditRecords: () => undefined },
    spoolMax: count,
    batchMax: 2000,
    intervalMs: 60_000,
  });
  const atMs = Date.now();
  for (let i = 0; i < count; i++) {
    writer.record({
      org,
      atMs: atMs + i,
      action: 'api.request',
      outcome: 'success',
      actorRealm: org,
      actorId: `id-${i % 97}`,
      actorName: `user-${i % 97}`,
      credential: 'bearer',
      clientId: `_${org}-api`,
      jobCredential: null,
      tokenId: randomBytes(8).toString('hex'),
      jkt: null,
      method: 'GET',
      route: '/api/{organization_id}/platform/workspaces',
      path: `/api/${org}/platform/workspaces`,
      workspace: null,
      status: 200,
      result: null,
      reason: null,
      address: '127.0.0.1',
      requestId: randomBytes(8).toString('hex'),
      details: {},
    });
  }
  await writer.flush();
  await writer.close(1000);
}
