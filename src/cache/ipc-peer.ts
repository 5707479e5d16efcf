/**
 * The IPC channel between the supervising process and one worker (node:cluster's), as calls that
 * answer and one-way messages. Only messages marked `realmgate` are read: node:cluster and
 * prom-client use the same channel for their own.
 */

/** What node:cluster gives both ends: `process` in a worker, a `Worker` in the primary. */
export interface IpcEndpoint {
  send(message: unknown): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

type Message =
  | { realmgate: 'call'; id: number; op: string; args: unknown[] }
  | { realmgate: 'answer'; id: number; value?: unknown; error?: string }
  | { realmgate: 'tell'; op: string; args: unknown[] };

export type IpcHandlers = Record<string, (...args: never[]) => unknown>;

export interface IpcPeer {
  /** Runs `op` at the other end and resolves to what it returned; rejects when it threw. */
  call<T>(op: string, ...args: unknown[]): Promise<T>;
  /** As `call`, but rejects when no answer came within `timeoutMs` instead of the default. */
  callWithin<T>(timeoutMs: number, op: string, ...args: unknown[]): Promise<T>;
  /** Serves `op` to the other end from now on (replacing what served it before). */
  serve(op: string, handler: (...args: never[]) => unknown): void;
  /** Sends `op` to the other end without waiting for an answer. */
  tell(op: string, ...args: unknown[]): void;
  /** Stops reading the channel; calls still waiting reject. */
  close(): void;
}

/** How long a call may wait for its answer: the other end died or is stuck beyond it. */
export const CALL_TIMEOUT_MS = 5000;

/**
 * Serves `handlers` to the other end of `endpoint` and lets this end call the other's. Calls
 * answer in the order the other end completes them; a handler's error comes back as a rejection
 * with its message (never its stack: the other end logs it as its own).
 */
export function createIpcPeer(endpoint: IpcEndpoint, handlers: IpcHandlers = {}): IpcPeer {
  let nextId = 1;
  const waiting = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }
  >();
  const answer = (id: number, outcome: { value?: unknown; error?: string }) => {
    try {
      endpoint.send({ realmgate: 'answer', id, ...outcome } satisfies Message);
    } catch {
      // The other end is gone: nobody waits for this answer any more.
    }
  };
  const run = (op: string, args: unknown[]): Promise<unknown> => {
    const handler = handlers[op] as ((...args: unknown[]) => unknown) | undefined;
    if (!handler) return Promise.reject(new Error(`no IPC operation ${op}`));
    return Promise.resolve().then(() => handler(...args));
  };
  const listener = (raw: unknown) => {
    const message = raw as Partial<Message> | null;
    if (!message || typeof message !== 'object' || !('realmgate' in message)) return;
    if (message.realmgate === 'call') {
      const { id, op, args } = message as Extract<Message, { realmgate: 'call' }>;
      run(op, args).then(
        (value) => answer(id, { value }),
        (err: unknown) => answer(id, { error: (err as Error).message ?? String(err) }),
      );
    } else if (message.realmgate === 'answer') {
      const { id, value, error } = message as Extract<Message, { realmgate: 'answer' }>;
      const call = waiting.get(id);
      if (!call) return;
      waiting.delete(id);
      clearTimeout(call.timer);
      if (error === undefined) call.resolve(value);
      else call.reject(new Error(error));
    } else if (message.realmgate === 'tell') {
      const { op, args } = message as Extract<Message, { realmgate: 'tell' }>;
      void run(op, args).catch(() => undefined);
    }
  };
  const callWithin = <T>(timeoutMs: number, op: string, ...args: unknown[]): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`IPC call ${op} not answered within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      try {
        endpoint.send({ realmgate: 'call', id, op, args } satisfies Message);
      } catch (err) {
        waiting.delete(id);
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  endpoint.on('message', listener);
  return {
    call: <T>(op: string, ...args: unknown[]) => callWithin<T>(CALL_TIMEOUT_MS, op, ...args),
    callWithin,
    serve(op, handler) {
      handlers[op] = handler;
    },
    tell(op, ...args) {
      try {
        endpoint.send({ realmgate: 'tell', op, args } satisfies Message);
      } catch {
        // The other end is gone; a worker's replacement reads what was kept (see ipc-hub.ts).
      }
    },
    close() {
      endpoint.off('message', listener);
      for (const [id, call] of waiting) {
        clearTimeout(call.timer);
        call.reject(new Error('IPC channel closed'));
        waiting.delete(id);
      }
    },
  };
}
