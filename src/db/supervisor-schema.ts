import { schemaCurrent, type SchemaState } from './migrate-at-start.ts';

/** What of the channel between a worker and its supervising process (cache/ipc-peer.ts) this uses. */
export interface SchemaChannel {
  call<T>(op: string): Promise<T>;
  serve(op: string, handler: () => unknown): void;
  tell(op: string): void;
}

/**
 * The IPC operations between a worker and its supervising process, which migrates for all:
 * whether the schema is current (a worker asks as it starts), that the database answered (a
 * worker's readiness check tells it), that the schema is now current (told every worker).
 */
export const SCHEMA_IPC = {
  current: 'schema.current',
  databaseAnswered: 'schema.databaseAnswered',
  migrated: 'schema.migrated',
} as const;

/**
 * A worker's view of the schema its supervising process migrates: current at once unless that
 * process is still migrating in the background (PostgreSQL unreachable at start), then once it
 * says so. Its `ready` never rejects: a migration that fails otherwise ends the supervising
 * process, and its workers with it.
 */
export async function schemaOfSupervisor(peer: SchemaChannel): Promise<SchemaState> {
  let current = false;
  let stopped = false;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  // Listening before asking: told after the answer, or the answer says it.
  peer.serve(SCHEMA_IPC.migrated, () => {
    current = true;
    if (!stopped) markReady();
  });
  if (await peer.call<boolean>(SCHEMA_IPC.current)) return schemaCurrent;
  return {
    current: () => current,
    ready,
    databaseAnswered: () => peer.tell(SCHEMA_IPC.databaseAnswered),
    stop() {
      stopped = true;
    },
  };
}

/**
 * The supervising process's side for one worker: answers with `schema`'s state, and passes on
 * that the database answered to the migration waiting out its backoff.
 */
export function serveSchema(peer: SchemaChannel, schema: SchemaState): void {
  peer.serve(SCHEMA_IPC.current, () => schema.current());
  peer.serve(SCHEMA_IPC.databaseAnswered, () => schema.databaseAnswered());
}
