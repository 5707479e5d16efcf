import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromEveryWorker,
  startTwoWorkers,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { createUser, grantAtKeycloak, uniqueId } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import {
  startDatabaseRelay,
  type KeycloakRelay,
  type DatabaseRelay,
} from '../helpers/tcp-front.ts';

/**
 * A worker started again while PostgreSQL is down serves the organizations its siblings
 * confirmed before the outage (the supervising process keeps them), as its siblings do; an id
 * no worker confirmed is still refused. Ports 19730-19731 (the gateway), 19735 (Keycloak's
 * relay), 19736 (the database's relay).
 */
describe('a worker started again during a database outage, two workers', () => {
  const port = 19730;
  let database: DatabaseRelay;
  let keycloak: KeycloakRelay;
  let gateway: ClusteredGateway;
  let upstream: RecordingUpstream;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    upstream = await startRecordingUpstream();
    database = await startDatabaseRelay(port + 6);
    ({ gateway, keycloak } = await startTwoWorkers(port, {
      DATABASE_URL: database.databaseUrl,
      AUTOMATION_UPSTREAM_URL: upstream.url,
    }));
  });

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await database?.cut();
    await upstream?.close();
    await closeTestDb();
  });

  it('serves a known organization (Bearer) from the new worker, and refuses an unknown one', async () => {
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    const bearer = { authorization: `Bearer ${await grantAtKeycloak(member)}` };
    const forwarded = `/api/${org}/workspaces/ws1/ita/jobs`;
    const unknown = `/api/${uniqueId('org-')}/workspaces/ws1/ita/jobs`;
    // Every worker confirms the organization while the database answers.
    const before = await fromEveryWorker(() => gateway.send(forwarded, bearer));
    expect(before.map((a) => a.status)).toEqual(before.map(() => 200));

    await database.cut();
    try {
      const ready = await gateway.logLine((l) => l.msg === 'worker ready' && l.worker === 1);
      process.kill(ready.pid as number, 'SIGKILL');
      await gateway.logLine(
        (l) => l.msg === 'worker ready' && l.worker === 1 && l.pid !== ready.pid,
      );

      const served = await fromEveryWorker(() => gateway.send(forwarded, bearer));
      expect(served.map((a) => [a.worker, a.status])).toEqual(served.map((a) => [a.worker, 200]));
      // An id no worker confirmed may be real: refused 503 (never forwarded) on every worker.
      const refused = await fromEveryWorker(() => gateway.send(unknown, bearer));
      expect(
        refused.map((a) => [a.worker, a.status, (JSON.parse(a.body) as { result: string }).result]),
      ).toEqual(refused.map((a) => [a.worker, 503, '503-00003']));
      expect(upstream.seen.filter((seen) => !seen.url.includes(org))).toEqual([]);
    } finally {
      await database.restore();
    }
  });
});
