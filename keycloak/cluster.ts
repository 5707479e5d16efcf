import { readFileSync, statSync, existsSync } from 'node:fs';
import path from 'node:path';
import { startLocalKeycloak, type LocalKeycloak, type LocalKeycloakOptions } from './launcher.ts';

export interface LocalKeycloakClusterOptions extends Omit<
  LocalKeycloakOptions,
  'httpPort' | 'managementPort' | 'clusterPort' | 'dbUrl' | 'stateDir'
> {
  /** How many nodes; node i (from 0) uses each first port + i. */
  nodes: number;
  /** The PostgreSQL database every node shares (`postgres://...`). */
  dbUrl: string;
  /** Folder holding one `node-<i>` state folder per node (logs, transaction logs). */
  stateDir: string;
  firstHttpPort: number;
  firstManagementPort: number;
  /** Clustering transport ports; failure detection uses these + 100. */
  firstClusterPort: number;
}

export interface KeycloakClusterNode {
  readonly index: number;
  /** Base URL including `/auth`; the same across restarts. */
  readonly url: string;
  /** Process id of the running instance, undefined while stopped or killed. */
  readonly pid: number | undefined;
  readonly logFile: string;
  stop(): Promise<void>;
  /** SIGKILL, as a crash would: no goodbye to the cluster. */
  kill(): Promise<void>;
  /** Starts the node again (after stop or kill) and waits until it serves tokens. */
  restart(): Promise<void>;
  /** Members in the last cluster view this instance logged (since its latest start). */
  clusterSize(): number | undefined;
}

export interface LocalKeycloakCluster {
  readonly nodes: KeycloakClusterNode[];
  /** Stops every node that is still running. */
  stop(): Promise<void>;
}

/**
 * Starts `nodes` local Keycloak nodes on one PostgreSQL database as one Keycloak cluster, all
 * on loopback. The first node starts alone (it creates the schema, the bootstrap administrator
 * and the imported realm); the others then join it one by one, so no two nodes migrate or
 * import at the same time.
 */
export async function startLocalKeycloakCluster(
  options: LocalKeycloakClusterOptions,
): Promise<LocalKeycloakCluster> {
  const nodes = Array.from({ length: options.nodes }, (_, index) => clusterNode(options, index));
  try {
    for (const node of nodes) await node.restart();
  } catch (err) {
    await Promise.all(nodes.map((node) => node.stop()));
    throw err;
  }
  return { nodes, stop: async () => void (await Promise.all(nodes.map((n) => n.stop()))) };
}

function clusterNode(options: LocalKeycloakClusterOptions, index: number): KeycloakClusterNode {
  const { firstHttpPort, firstManagementPort, firstClusterPort } = options;
  const nodeOptions: LocalKeycloakOptions = {
    ...options,
    stateDir: path.join(options.stateDir, `node-${index}`),
    httpPort: firstHttpPort + index,
    managementPort: firstManagementPort + index,
    clusterPort: firstClusterPort + index,
    dbUrl: options.dbUrl,
    maxHeap: options.maxHeap ?? '512m',
    log: options.log && ((message) => options.log!(`node ${index}: ${message}`)),
  };
  const logFile = path.join(path.resolve(nodeOptions.stateDir), 'keycloak.log');
  let running: LocalKeycloak | undefined;
  let logStart = 0;
  return {
    index,
    url: `http://127.0.0.1:${nodeOptions.httpPort}/auth`,
    logFile,
    get pid() {
      return running?.pid;
    },
    async stop() {
      await running?.stop();
      running = undefined;
    },
    async kill() {
      await running?.kill();
      running = undefined;
    },
    async restart() {
      if (running) return;
      logStart = existsSync(logFile) ? statSync(logFile).size : 0;
      running = await startLocalKeycloak(nodeOptions);
    },
    clusterSize: () => lastClusterViewSize(logFile, logStart),
  };
}

/**
 * Infinispan logs each new membership as
 * `ISPN000094: Received new cluster view for channel ISPN: [a|3] (2) [a, b]`.
 */
function lastClusterViewSize(logFile: string, from: number): number | undefined {
  if (!existsSync(logFile)) return undefined;
  const text = readFileSync(logFile).subarray(from).toString('utf8');
  const views = [
    ...text.matchAll(/ISPN000094: Received new cluster view[^[]*\[[^\]]*\] \((\d+)\)/g),
  ];
  const last = views.at(-1);
  return last ? Number(last[1]) : undefined;
}
