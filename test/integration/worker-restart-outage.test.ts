import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromEveryWorker,
  startTwoWorkers,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { createUser, grantAtKeycloak } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import type { KeycloakRelay } from '../helpers/tcp-front.ts';

/**
 * A worker started again while Keycloak is down is as ready as its siblings: it verifies tokens
 * with the key sets the supervising process kept, so readiness must not take the whole gateway
 * out of rotation on its word. Ports 18990-18991 (the gateway), 18995 (Keycloak's relay).
 */
describe('a worker started again during a Keycloak outage, two workers', () => {
  const port = 18990;
  let keycloak: KeycloakRelay;
  let gateway: ClusteredGateway;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    ({ gateway, keycloak } = await startTwoWorkers(port));
  });

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await closeTestDb();
  });

  it('serves verified tokens and answers ready (degraded) from the new worker too', async () => {
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    const bearer = { authorization: `Bearer ${await grantAtKeycloak(member)}` };
    const listing = `/api/${org}/platform/workspaces`;
    const before = await fromEveryWorker(() => gateway.send(listing, bearer));
    expect(before.map((a) => a.status)).toEqual(before.map(() => 200));

    await keycloak.cut();
    try {
      const ready = await gateway.logLine((l) => l.msg === 'worker ready' && l.worker === 1);
      process.kill(ready.pid as number, 'SIGKILL');
      await gateway.logLine(
        (l) => l.msg === 'worker ready' && l.worker === 1 && l.pid !== ready.pid,
      );

      const served = await fromEveryWorker(() => gateway.send(listing, bearer));
      expect(served.map((a) => [a.worker, a.status])).toEqual(served.map((a) => [a.worker, 200]));
      // Ready, and saying Keycloak is down (the new worker's back-channel alignment, which
      // needs Keycloak, may be degraded too).
      const readiness = await fromEveryWorker(() => gateway.send('/readyz'));
      expect(
        readiness.map((a) => [
          a.worker,
          a.status,
          (JSON.parse(a.body) as { data: { keycloak?: string } }).data.keycloak,
        ]),
      ).toEqual(readiness.map((a) => [a.worker, 200, 'down']));
    } finally {
      await keycloak.restore();
    }
  });
});
