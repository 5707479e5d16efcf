import { randomBytes } from 'node:crypto';
import { apiEvent, quietWriter } from './audit-records.ts';
import { testDb } from './platform.ts';

/**
 * Writes `count` successful Bearer requests into `org`'s log, a millisecond apart, through the
 * gateway's own writer (chained as the gateway chains them): a long log without `count`
 * requests.
 */
export async function writeRequests(org: string, count: number): Promise<void> {
  const writer = quietWriter(testDb(), count);
  const atMs = Date.now();
  for (let i = 0; i < count; i++) {
    writer.record(
      apiEvent(org, atMs + i, {
        actorId: `id-${i % 97}`,
        actorName: `user-${i % 97}`,
        clientId: `_${org}-api`,
        tokenId: randomBytes(8).toString('hex'),
        route: '/api/{organization_id}/platform/workspaces',
        path: `/api/${org}/platform/workspaces`,
        requestId: randomBytes(8).toString('hex'),
      }),
    );
  }
  await writer.flush();
  await writer.close(1000);
}
