import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  fromEveryWorker,
  startTwoWorkers,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { createUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import type { KeycloakRelay } from '../helpers/tcp-front.ts';

/** BASIC_CACHE_MAX_SECONDS of this gateway: the outage below outlasts it. */
const CACHE_SECONDS = 2;

/**
 * The workers of one gateway without Redis share their cached Basic logins through the
 * supervising process's cache: a login one worker verified before Keycloak was cut off is
 * served by every worker through the outage, past BASIC_CACHE_MAX_SECONDS (basic-outage.test.ts
 * shows the rules with replicas, with and without Redis).
 */
describe('a Basic login through a Keycloak outage, two workers without Redis', () => {
  const port = 18920;
  let keycloak: KeycloakRelay;
  let gateway: ClusteredGateway;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    ({ gateway, keycloak } = await startTwoWorkers(port, {
      BASIC_CACHE_MAX_SECONDS: String(CACHE_SECONDS),
      BASIC_OUTAGE_MAX_SECONDS: '600',
    }));
  });

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await closeTestDb();
  });

  it('every worker serves a login one worker verified; another password gets 503', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const path = `/api/${org}/platform/workspaces`;
    const right = { authorization: basicAuth(user) };
    const wrong = { authorization: basicAuth({ ...user, password: 'another-password' }) };
    // One request: one worker verifies the login (the other has never seen it), and caches it
    // until CACHE_SECONDS after its grant, at the latest after this answer's log line.
    const verified = await gateway.send(path, right);
    expect(verified.status).toBe(200);
    const freshUntil = verified.loggedAt + CACHE_SECONDS * 1000;
    await keycloak.cut();
    try {
      // The gateway's own clock must pass the cache bound (its workers are processes of their
      // own, whose clock no test can advance; basic-outage.test.ts advances an in-process
      // replica's): read from its log lines, until it answers past the bound.
      await vi.waitFor(
        async () => {
          const answer = await gateway.send(path, right);
          expect(answer.status).toBe(200);
          expect(answer.loggedAt).toBeGreaterThan(freshUntil);
        },
        { timeout: (CACHE_SECONDS + 10) * 1000, interval: 250 },
      );
      const during = await fromEveryWorker(() => gateway.send(path, right));
      expect(during.map((a) => a.status)).toEqual(during.map(() => 200));
      const refused = await fromEveryWorker(() => gateway.send(path, wrong));
      expect(refused.map((a) => [a.status, a.headers['retry-after']])).toEqual(
        refused.map(() => [503, '5']),
      );
    } finally {
      await keycloak.restore();
    }
  });
});
