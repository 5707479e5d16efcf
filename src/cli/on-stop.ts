import process from 'node:process';

// What a realmgate stopped from outside must not leave behind: the credentials file's lock (it
// would look held for 30 s), a temporary file holding a refresh token or a private key. One
// listener runs every clean-up registered, then ends the process by the signal as it would have
// ended: listeners of their own, each re-raising the signal, would see it caught again by the
// next one still listening, and the process would go on running.

/** The signals that stop a command from outside: Ctrl-C, a CI job's cancel, a closed terminal. */
const STOPPING_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

const cleanUps = new Set<() => void>();

function onSignal(signal: NodeJS.Signals): void {
  for (const stopping of STOPPING_SIGNALS) process.off(stopping, onSignal);
  const pending = [...cleanUps];
  cleanUps.clear();
  for (const cleanUp of pending) {
    try {
      cleanUp();
    } catch {
      // Gone already; nothing else can be done on the way out.
    }
  }
  // No listener of ours is left: the signal now ends the process as it would have.
  process.kill(process.pid, signal);
}

/**
 * Runs `cleanUp` (synchronous: the process ends right after) if a stopping signal arrives
 * before the returned function is called, which ends the watch.
 */
export function cleanUpIfStopped(cleanUp: () => void): () => void {
  if (cleanUps.size === 0) {
    for (const signal of STOPPING_SIGNALS) process.on(signal, onSignal);
  }
  cleanUps.add(cleanUp);
  return () => {
    if (!cleanUps.delete(cleanUp) || cleanUps.size > 0) return;
    for (const signal of STOPPING_SIGNALS) process.off(signal, onSignal);
  };
}
