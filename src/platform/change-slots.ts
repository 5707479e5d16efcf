/**
 * At most `size` pieces of work running at once in this process; the others wait in memory, in
 * order, holding nothing (no database connection) until a slot is free.
 */
export function createChangeSlots(size: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];

  async function take(): Promise<void> {
    if (running < size) {
      running += 1;
      return;
    }
    // The slot is handed over by `give`, `running` unchanged.
    await new Promise<void>((resolve) => waiting.push(resolve));
  }

  function give(): void {
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
  }

  return async (work) => {
    await take();
    try {
      return await work();
    } finally {
      give();
    }
  };
}
