import { expect } from 'vitest';
import type { BenchUser } from '../../bench/fixtures.ts';
import type { KeycloakClusterNode } from '../../keycloak/cluster.ts';
import { basicAuth } from '../helpers/api.ts';
import {
  answerOf,
  nodeUpOn,
  passwordGrantRequest,
  platformPath,
  readinessOf,
  statusOf,
  warmLoadRequests,
} from './clients.ts';
import { printFigures, seconds, steadyLoad, timeUntil } from './measure.ts';
import { column, LEAD_MS, outage, OUTAGE_MS, readiness, tally } from './outage-run.ts';
import type { HaStack } from './stack.ts';

/*
 * A dependency every replica needs, gone for 20 s under the steady load through HAProxy: every
 * Keycloak node, or the platform database. The replicas stay in rotation (their /readyz says
 * "degraded", not "down") and serve what needs no such dependency; what does need it answers
 * 503 with Retry-After, and works again soon after the dependency is back.
 */

export interface OutageContext {
  stack: HaStack;
  /** Users whose Bearer tokens and cached Basic logins make the steady load. */
  loadUsers: BenchUser[];
}

/**
 * Every Keycloak node killed (SIGKILL) for 20 s: no failed Bearer or cached-Basic request;
 * a new Basic login and a new password grant through HAProxy answer 503 with Retry-After; once
 * node 0 serves again (node 1 restarting meanwhile), both work within 10 s.
 */
export async function everyKeycloakNodeKilled(
  { stack, loadUsers }: OutageContext,
  [basicUser, grantUser]: [BenchUser, BenchUser],
) {
  const { cluster, haproxy } = stack;
  const [A, B] = stack.replicas;
  const [node0, node1] = cluster.nodes as [KeycloakClusterNode, KeycloakClusterNode];
  const org = basicUser.realm;
  const newBasicLogin = () => answerOf(haproxy, platformPath(org), basicAuth(basicUser));
  const newGrant = () => passwordGrantRequest(haproxy, grantUser);
  // Both nodes serve, in rotation on both replicas, before the kill (an earlier phase may have
  // left one down).
  for (const node of cluster.nodes) await node.restart();
  for (const gateway of [A, B]) {
    for (const node of cluster.nodes) {
      const inRotation = await timeUntil(
        performance.now(),
        () => nodeUpOn(gateway, node.index),
        (up) => up === 1,
      );
      expect(inRotation.ms, `node ${node.index} on ${gateway.url}`).toBeDefined();
    }
  }
  const requests = await warmLoadRequests(stack, loadUsers);
  const logStart = haproxy.logOffset();
  const load = steadyLoad(haproxy, requests, 20);
  let node0Ms = 0;
  let node1Return: Promise<number> = Promise.resolve(0);
  const { loaded, samples, downMs, back } = await outage(
    load,
    async () => void (await Promise.all(cluster.nodes.map((node) => node.kill()))),
    async () => ({
      answers: await Promise.all([newBasicLogin(), newGrant()]),
      readiness: await Promise.all([A, B].map((gateway) => readinessOf(gateway, 'keycloak'))),
    }),
    async () => {
      const restartAt = performance.now();
      await node0.restart();
      const node1At = performance.now();
      node0Ms = node1At - restartAt;
      // The nodes come back one by one: node 1 starts while the logins are measured.
      node1Return = node1.restart().then(() => performance.now() - node1At);
    },
  );
  const [basicBack, grantBack] = await Promise.all([
    timeUntil(
      back,
      async () => (await newBasicLogin()).status,
      (s) => s === 200,
    ),
    timeUntil(
      back,
      async () => (await newGrant()).status,
      (s) => s === 200,
    ),
  ]);
  const node1Ms = await node1Return;
  const { stateChanges } = haproxy.logSince(logStart);

  printFigures('every Keycloak node killed for 20 s, under steady load', loaded, {
    'failed requests (verified tokens, cached Basic logins)': loaded.result.bad,
    'Keycloak nodes killed for': `${seconds(downMs)} before the restarts (the load covered the first ${seconds(OUTAGE_MS - LEAD_MS)})`,
    'new Basic login during the outage (HAProxy)': tally(column(samples, 0)),
    'new password grant during the outage (HAProxy /auth)': tally(column(samples, 1)),
    '/readyz of replica A / B during the outage': `${readiness(samples, 0)} / ${readiness(samples, 1)}`,
    'replicas HAProxy took out over the whole phase': stateChanges.join('; ') || 'none',
    'node 0 restarted and serving in': seconds(node0Ms),
    'first new Basic login after node 0 returned': `${seconds(basicBack.ms)} (${basicBack.tries} tries)`,
    'first new password grant after node 0 returned': `${seconds(grantBack.ms)} (${grantBack.tries} tries)`,
    'node 1 restarted (after node 0) and serving in': seconds(node1Ms),
  });
  expect(loaded.result.bad).toBe(0);
  expect(stateChanges).toEqual([]);
  for (const answer of [...column(samples, 0), ...column(samples, 1)]) {
    expect(answer.status).toBe(503);
    expect(Number(answer.retryAfter)).toBeGreaterThan(0);
  }
  for (const sample of samples) {
    for (const ready of sample.readiness) expect(ready).toMatch(/^200 /);
  }
  expect(basicBack.ms, basicBack.failures.join(', ')).toBeLessThanOrEqual(10_000);
  expect(grantBack.ms, grantBack.failures.join(', ')).toBeLessThanOrEqual(10_000);
}

/**
 * The platform database stopped for 20 s: no failed request on the forwarded route of an
 * organization the replicas know; the list endpoints answer 503 with Retry-After; once it is
 * started again, they answer 200 again on both replicas.
 */
export async function databaseStopped({ stack, loadUsers }: OutageContext) {
  const { haproxy, platformDb } = stack;
  const [A, B] = stack.replicas;
  const org = loadUsers[0]!.realm;
  const requests = await warmLoadRequests(stack, loadUsers);
  const bearer = requests.find((r) => r.authorization?.startsWith('Bearer '))!.authorization!;
  const list = (at: { url: string }) => answerOf(at, platformPath(org), bearer);
  expect((await list(haproxy)).status).toBe(200);
  const logStart = haproxy.logOffset();
  const load = steadyLoad(haproxy, requests, 20);
  const { loaded, samples, downMs, back } = await outage(
    load,
    () => platformDb.stop(),
    async () => ({
      answers: await Promise.all([list(haproxy), list(A), list(B)]),
      readiness: await Promise.all([A, B].map((gateway) => readinessOf(gateway, 'database'))),
    }),
    () => platformDb.start(),
  );
  const [listBack, onA, onB] = await Promise.all(
    [haproxy, A, B].map((at) =>
      timeUntil(
        back,
        () => statusOf(at, platformPath(org), bearer),
        (s) => s === 200,
      ),
    ),
  );
  const readyAfter = await Promise.all([A, B].map((gateway) => readinessOf(gateway, 'database')));
  const { stateChanges } = haproxy.logSince(logStart);

  printFigures('platform database stopped for 20 s, under steady load', loaded, {
    'failed requests (forwarded route, known organization)': loaded.result.bad,
    'requests the upstream received': stack.upstream.seen.length,
    'database stopped for': `${seconds(downMs)} (the load covered the first ${seconds(OUTAGE_MS - LEAD_MS)})`,
    'list endpoint during the outage (HAProxy, A, B)': tally(samples.flatMap((s) => s.answers)),
    '/readyz of replica A / B during the outage': `${readiness(samples, 0)} / ${readiness(samples, 1)}`,
    'replicas HAProxy took out over the whole phase': stateChanges.join('; ') || 'none',
    'list endpoint 200 again after the database started (HAProxy / A / B)': [listBack, onA, onB]
      .map((m) => seconds(m!.ms))
      .join(' / '),
    '/readyz of replica A / B afterwards': readyAfter.join(' / '),
  });
  expect(loaded.result.bad).toBe(0);
  expect(stateChanges).toEqual([]);
  for (const answer of samples.flatMap((s) => s.answers)) {
    expect(answer.status).toBe(503);
    expect(Number(answer.retryAfter)).toBeGreaterThan(0);
  }
  for (const sample of samples) {
    for (const ready of sample.readiness) expect(ready).toMatch(/^200 /);
  }
  for (const measured of [listBack, onA, onB]) {
    expect(measured!.ms, measured!.failures.join(', ')).toBeDefined();
  }
  for (const ready of readyAfter) expect(ready).toBe('200 (database up)');
}
