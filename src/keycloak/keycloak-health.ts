import { CHECK_TIMEOUT_MS, sharedCheck, type ReadinessReport } from '../http/health.router.ts';
import { displayUrlOf, type KeycloakNode, type KeycloakNodes } from './keycloak-nodes.ts';
import { within } from '../time/within.ts';

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
  probeAll: () => Promise<readonly KeycloakNode[]> = () => nodes.check(),
): Promise<ReadinessReport> {
  // Before any node has answered, a probe may outlast the check's own bound (a node that
  // accepts and never answers takes KEYCLOAK_TIMEOUT_MS): `blocks` is then decided from
  // whether one has answered by now, not left to a timeout that would report a plain `down`.
  const all = nodes.reached
    ? await probeAll()
    : await answerOr(probeAll(), FIRST_ANSWER_WAIT_MS, nodes.all);
  // A node's initial `up` means "not yet known": no node is up before one has answered.
  const up = nodes.reached ? all.filter((node) => node.state === 'up').length : 0;
  const status = up === all.length ? 'up' : up > 0 ? 'degraded' : 'down';
  const blocked = !nodes.reached && !(await keysHeldElsewhere());
  return {
    status,
    ...(blocked && { blocks: 'Keycloak has not answered since this replica started' }),
    ...(all.length > 1 && {
      details: {
        nodes: all.map((node) => ({
          url: displayUrlOf(node.url),
          state: nodes.reached ? node.state : 'down',
          since: new Date(node.since).toISOString(),
        })),
      },
    }),
  };
}

/** Leaves room within CHECK_TIMEOUT_MS for `keysHeldElsewhere` (an IPC call) and the answer. */
const FIRST_ANSWER_WAIT_MS = CHECK_TIMEOUT_MS / 2;

/** What `probing` resolves to within `ms`; `otherwise` if it takes longer or fails. */
function answerOr<T>(probing: Promise<T>, ms: number, otherwise: T): Promise<T> {
  return within(
    probing.catch(() => otherwise),
    ms,
    () => otherwise,
  );
}

/**
 * Probes every node as `check` does, each node's probe shared by sharedCheck's rule (the public
 * `/readyz` is unauthenticated: without it each request probed every node). Per node, so that
 * one node down, whose failure is not held, does not have the others probed at every request.
 */
export function sharedNodeProbes(nodes: KeycloakNodes): () => Promise<readonly KeycloakNode[]> {
  const probes = nodes.all.map((node) => sharedCheck(() => nodes.probe(node)));
  return async () => {
    await Promise.all(probes.map((probe) => probe().catch(() => undefined)));
    return nodes.all;
  };
}
