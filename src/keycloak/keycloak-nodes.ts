import type { KeycloakFailure } from './keycloak-failures.ts';
import { checkKeycloak } from './keycloak-probe.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/** Whether the gateway sends a node calls (`up`) or avoids it until it answers again (`down`). */
export type NodeState = 'up' | 'down';

/** One Keycloak node of `KEYCLOAK_URL` (one URL is a one-node list). */
export interface KeycloakNode {
  /** Position in `KEYCLOAK_URL`, from 0: the node's name in logs and metrics. */
  readonly index: number;
  /** Base URL including the relative path, e.g. `http://10.0.0.7:8080/auth`. */
  readonly url: string;
  readonly state: NodeState;
  /** When the node entered its state (epoch ms): the gateway's start, or the last change. */
  readonly since: number;
}

/** The nodes and their states, shared by the client layer, the /auth proxy and /readyz. */
export interface KeycloakNodes {
  readonly all: readonly KeycloakNode[];
  /**
   * The node for the next call: round robin over the nodes that are up. With none up, still one
   * (round robin over all): the gateway never fails a call without trying.
   */
  pick(): KeycloakNode;
  /** Another node that is up, to retry a call that `failed` on; undefined if there is none. */
  other(failed: KeycloakNode): KeycloakNode | undefined;
  /** A call could not reach `node` (connect error, broken connection): down until it answers. */
  failed(node: KeycloakNode, reason: string): void;
  /**
   * A call has waited `timeoutMs` for `node`'s answer: busy or hung? It is probed now (one
   * probe however many calls wait) and down only when its probe fails too; resolves to its
   * state then. A busy node answers its cheap probe and stays in rotation.
   */
  slow(node: KeycloakNode, reason: string): Promise<NodeState>;
  /**
   * A call to `node` (made by `caller`, e.g. `/auth proxy`) ended with `failure`: the one place
   * that decides what that says of the node. Unreachable: `failed`. A timeout may be a busy
   * node, so it is probed (`slow`). A bad answer came from a node that is up.
   */
  callFailed(node: KeycloakNode, failure: KeycloakFailure, caller: string): void;
  /** `node` answered: it is up (a no-op unless it was down). */
  answered(node: KeycloakNode): void;
  /**
   * Whether any node has answered (a probe or a call) since the gateway started: until then
   * this replica holds none of Keycloak's keys and can verify no token.
   */
  readonly reached: boolean;
  /** Probes every node now (the readiness check) and returns their states. */
  check(): Promise<readonly KeycloakNode[]>;
  /** Probes `node` now (a probe in flight is shared); rejects unless it answered. */
  probe(node: KeycloakNode): Promise<void>;
  /** Stops probing (the gateway is shutting down). */
  close(): void;
}

export interface KeycloakNodesOptions {
  urls: readonly string[];
  /** Resolves when the node at `url` answers; by default its `/realms/master` within `timeoutMs`. */
  probe?: (url: string) => Promise<void>;
  timeoutMs: number;
  /** How often nodes that are down are probed; none is probed while every node is up. */
  probeIntervalMs?: number;
  /** Told of each change of state, e.g. to log it. */
  onChange?: (node: KeycloakNode, reason: string) => void;
  clock?: Clock;
}

/** Short enough that a restarted node takes traffic again within a few seconds. */
const PROBE_INTERVAL_MS = 2000;

interface NodeRecord {
  index: number;
  url: string;
  state: NodeState;
  since: number;
  /** The probe in flight, shared by everyone asking meanwhile. */
  probing: Promise<void> | undefined;
}

/**
 * Holds the Keycloak nodes of `KEYCLOAK_URL`. A node goes down when a call cannot reach it or
 * its probe fails (a call kept waiting has it probed: `slow`), and up again when a probe or a
 * call gets an answer; the nodes that are down
 * are probed every `probeIntervalMs` (a timer that runs only while one is down).
 */
export function createKeycloakNodes(options: KeycloakNodesOptions): KeycloakNodes {
  if (options.urls.length === 0) throw new Error('no Keycloak node');
  const { clock = systemClock } = options;
  const now = () => clock.now();
  const probe = options.probe ?? ((url: string) => checkKeycloak(url, options.timeoutMs));
  const intervalMs = options.probeIntervalMs ?? PROBE_INTERVAL_MS;
  const started = now();
  const nodes: NodeRecord[] = options.urls.map((url, index) => ({
    index,
    url,
    state: 'up',
    since: started,
    probing: undefined,
  }));
  const count = nodes.length;
  let cursor = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let reached = false;

  function change(node: NodeRecord, state: NodeState, reason: string): void {
    if (node.state === state) return;
    node.state = state;
    node.since = now();
    options.onChange?.(node, reason);
    if (state === 'down') startProbing();
  }

  function startProbing(): void {
    if (timer || closed) return;
    timer = setInterval(probeDownNodes, intervalMs);
    timer.unref();
  }

  function probeDownNodes(): void {
    const down = nodes.filter((node) => node.state === 'down');
    if (down.length === 0) {
      clearInterval(timer);
      timer = undefined;
      return;
    }
    for (const node of down) void probeNode(node);
  }

  /** Probes `node` unless a probe of it is in flight, whose outcome is then shared. */
  function probeNode(node: NodeRecord, why = ''): Promise<void> {
    node.probing ??= probe(node.url)
      .then(
        () => {
          reached = true;
          change(node, 'up', 'probe answered');
        },
        (err: unknown) => change(node, 'down', `${why}probe failed: ${(err as Error).message}`),
      )
      .finally(() => {
        node.probing = undefined;
      });
    return node.probing;
  }

  function failed(node: KeycloakNode, reason: string): void {
    change(nodes[node.index]!, 'down', reason);
  }

  async function slow(node: KeycloakNode, reason: string): Promise<NodeState> {
    const record = nodes[node.index]!;
    await probeNode(record, `${reason}, then `);
    return record.state;
  }

  return {
    all: nodes,
    pick() {
      if (count === 1) return nodes[0]!;
      for (let i = 0; i < count; i++) {
        const node = nodes[(cursor + i) % count]!;
        if (node.state === 'up') {
          cursor = (node.index + 1) % count;
          return node;
        }
      }
      const node = nodes[cursor]!;
      cursor = (cursor + 1) % count;
      return node;
    },
    other(failed) {
      for (let i = 1; i < count; i++) {
        const node = nodes[(failed.index + i) % count]!;
        if (node.state === 'up') return node;
      }
      return undefined;
    },
    failed,
    slow,
    callFailed(node, failure, caller) {
      if (failure === 'timeout') void slow(node, `${caller}: timeout`);
      else if (failure === 'unreachable') failed(node, `${caller}: ${failure}`);
    },
    get reached() {
      return reached;
    },
    answered(node) {
      reached = true;
      if (node.state === 'down') change(nodes[node.index]!, 'up', 'answered a call');
    },
    async check() {
      await Promise.all(nodes.map((node) => probeNode(node)));
      return nodes;
    },
    async probe(node) {
      const record = nodes[node.index]!;
      await probeNode(record);
      if (record.state !== 'up') throw new Error(`Keycloak node ${node.index} did not answer`);
    },
    close() {
      closed = true;
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** What `/readyz` and the logs show of a node's URL: never credentials, query or fragment. */
export function displayUrlOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`;
}
