/** A task run now and then in the background (`every`). */
export interface Periodic {
  /** No run starts after this; resolves once the run in progress, if any, has ended. */
  stop(): Promise<void>;
}

/**
 * Runs `task` every `intervalMs` (the first time after `firstMs`, by default one interval), in
 * the background: never two runs at once (the next is timed from the end of the last, so a
 * slow run delays it rather than piling up), never keeping the process alive, and a failed run
 * is told to `onError` and tried again next time.
 */
export function every(
  intervalMs: number,
  task: () => Promise<unknown>,
  options: { onError: (err: unknown) => void; firstMs?: number },
): Periodic {
  let running: Promise<void> | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (ms: number) => {
    timer = setTimeout(run, ms);
    timer.unref();
  };
  function run(): void {
    running = Promise.resolve()
      .then(task)
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
      clearTimeout(timer);
      await running;
    },
  };
}
