import type { ReadinessReport } from '../http/health.router.ts';
import { displayUrlOf, type KeycloakNodes } from './keycloak-nodes.ts';

/**
 * The readiness check of Keycloak: probes every node (updating its state). Up when all answer;
 * with several nodes, `degraded` while at least one does, and a report naming each node's state
 * and since when. Down when none answers: the replica still serves what it has verified, unless
 * no node has answered since it started (it holds no key to verify a token with): that `blocks`.
 * A worker's replica is its whole gateway: `keysHeldElsewhere` says whether the supervising
 * process keeps a key set a sibling fetched, which this worker verifies with.
 */
export async function checkKeycloakNodes(
  nodes: KeycloakNodes,
  keysHeldElsewhere: () => Promise<boolean> = () => Promise.resolve(false),
): Promise<ReadinessReport> {
  const all = await nodes.check();
  const up = all.filter((node) => node.state === 'up').length;
  const status = up === all.length ? 'up' : up > 0 ? 'degraded' : 'down';
  const blocked = status === 'down' && !nodes.reached && !(await keysHeldElsewhere());
  return {
    status,
    ...(blocked && { blocks: 'Keycloak has not answered since this replica started' }),
    ...(all.length > 1 && {
      details: {
        nodes: all.map((node) => ({
          url: displayUrlOf(node.url),
          state: node.state,
          since: new Date(node.since).toISOString(),
        })),
      },
    }),
  };
}
