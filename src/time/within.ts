/**
 * `work`'s outcome, or once `ms` have passed without one, what `late` answers (a value to go on
 * with, or a throw): a step that must not wait on a slow dependency longer than it may. `work`
 * goes on unwaited after that; its later failure is handled here, as the late answer was given.
 */
export async function within<T>(work: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<T>((resolve) => {
    // A promise of `late`'s answer: one that throws rejects the wait with what it threw.
    timer = setTimeout(() => resolve(new Promise<T>((answer) => answer(late()))), ms);
  });
  try {
    return await Promise.race([work, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
