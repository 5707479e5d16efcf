import type { ReadinessReport } from '../http/health.router.ts';
import { displayUrlOf, type KeycloakNodes } from './keycloak-nodes.ts';

/**
 * Keycloak is usable when the master realm's public description answers. This works for a
 * local Keycloak and for any external one, whose management port we may not reach.
 */
export async function checkKeycloak(keycloakUrl: string, timeoutMs: number): Promise<void> {
  const res = await fetch(`${keycloakUrl}/realms/master`, {
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.body?.cancel();
  if (res.status !== 200) throw new Error(`Keycloak answered ${res.status}`);
}

/**
 * The readiness check of Keycloak: probes every node (updating its state). One node: resolves
 * when it answers, as for any dependency. Several: a report naming each node's state and since
 * when, `up` when all answer, `degraded` (still ready) while at least one does, else `down`.
 */
export async function checkKeycloakNodes(nodes: KeycloakNodes): Promise<void | ReadinessReport> {
  const all = await nodes.check();
  const up = all.filter((node) => node.state === 'up').length;
  if (all.length === 1) {
    if (up === 0) throw new Error('Keycloak does not answer');
    return;
  }
  return {
    status: up === all.length ? 'up' : up > 0 ? 'degraded' : 'down',
    details: {
      nodes: all.map((node) => ({
        url: displayUrlOf(node.url),
        state: node.state,
        since: new Date(node.since).toISOString(),
      })),
    },
  };
}
