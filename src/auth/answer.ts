/**
 * An answer this process has in memory (a verified token, a cached login, a known organization),
 * or the promise of one it must ask for (Keycloak, Redis, the database). The admission's steps
 * return one, so a request whose every answer is known is decided without a promise, by the
 * same code that waits when one is not.
 */
export type Answer<T> = T | Promise<T>;

/**
 * `next(value, arg)` with the answer's value: at once when it is known, else once it comes.
 * `arg` lets a caller on the hot path pass what `next` needs without allocating a closure.
 */
export function whenKnown<T, R, A = undefined>(
  answer: Answer<T>,
  next: (value: T, arg: A) => Answer<R>,
  arg?: A,
): Answer<R> {
  return answer instanceof Promise
    ? answer.then((value) => next(value, arg as A))
    : next(answer, arg as A);
}
