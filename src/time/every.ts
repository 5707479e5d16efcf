/** A task run now and then in the background (`every`). */
export interface Periodic {
  /**
   * No run starts after this, and the run in progress is told (its signal aborts) so that it
   * ends at its next safe point; resolves once it has ended.
   */
  stop(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` (the first time after `firstMs`, by default one interval), in
 * the background: never two runs at once (the next is timed from the end of the last, so a
 * slow run delays it rather than piling up), never keeping the process alive, and a failed run
 * is told to `onError` and tried again next time. `task`'s signal aborts when stopped: a long run
 * (a prune in many steps) ends after the step in progress instead of holding a shutdown.
 */
export function every(
  intervalMs: number,
  task: (signal: AbortSignal) => Promise<unknown>,
  options: { onError: (err: unknown) => void; firstMs?: number },
): Periodic {
  let running: Promise<void> | undefined;
  let stopped = false;
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const schedule = (ms: number) => {
    timer = setTimeout(run, ms);
    timer.unref();
  };
  function run(): void {
    running = Promise.resolve()
      .then(() => task(stopping.signal))
      .then(() => undefined, options.onError)
      .finally(() => {
        running = undefined;
        if (!stopped) schedule(intervalMs);
      });
  }
  schedule(options.firstMs ?? intervalMs);
  return {
    async stop() {
      stopped = true;
      stopping.abort();
      clearTimeout(timer);
      await running;
    },
  };
}
