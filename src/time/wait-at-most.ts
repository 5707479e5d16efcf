/**
 * Waits for `work`, at most `ms`: a shutdown step that must not hold the process past its grace
 * period. What `work` still does after that goes on unwaited; a rejection of it is the caller's.
 */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  try {
    await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
