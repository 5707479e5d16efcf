import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The public `/readyz` is unauthenticated: a flood of it must not become a flood of probes of
 * every Keycloak node from every replica. Two nodes, each the real Keycloak behind a front of its
 * own that counts the probes (`GET <node>/realms/master`). Ports 19978/19979.
 */
describe('/readyz under a flood, and Keycloak', () => {
  let fronts: KeycloakFront[];
  let replica: Replica;

  beforeAll(async () => {
    fronts = [
      await startKeycloakFront(testEnv().keycloakUrl),
      await startKeycloakFront(testEnv().keycloakUrl),
    ];
    replica = await startReplica(19978, { KEYCLOAK_URL: fronts.map((f) => f.url).join(',') });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    for (const front of fronts ?? []) await front.close();
  });

  it('probes each node about once a second however often /readyz is asked', async () => {
    const probes = (front: KeycloakFront) =>
      front.seen.filter((seen) => seen.target === `${new URL(front.url).pathname}/realms/master`)
        .length;
    expect((await fetch(`${replica.url}/readyz`)).status).toBe(200);
    for (const front of fronts) front.seen.length = 0;
    const began = performance.now();
    for (let i = 0; i < 200; i++) {
      const res = await fetch(`${replica.url}/readyz`);
      expect(await res.json()).toMatchObject({ data: { keycloak: 'up' } });
    }
    const seconds = (performance.now() - began) / 1000;
    for (const front of fronts)
      expect(probes(front), `${front.url} in ${seconds.toFixed(1)} s`).toBeLessThanOrEqual(
        Math.ceil(seconds) + 1,
      );
  });
});
