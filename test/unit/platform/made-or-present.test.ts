import { describe, expect, it } from 'vitest';
import { madeOrPresent } from '../../../src/platform/realm-admin/made-or-present.ts';

/** An admin-client error as @keycloak/keycloak-admin-client throws it for Keycloak's answer. */
function refusal(status: number, errorMessage: string): Error {
  return Object.assign(new Error(errorMessage), {
    response: { status },
    responseData: { errorMessage },
  });
}

/** `isPresent` that says yes from its `after`-th call on, counting its calls. */
function presentAfter(after: number) {
  const probe = {
    calls: 0,
    isPresent: () => Promise.resolve(++probe.calls >= after),
  };
  return probe;
}

describe('a refused creation counts as done when a twin made it', () => {
  it('waits for what a concurrent twin made when Keycloak answers as to a race', async () => {
    for (const refused of [
      refusal(409, 'Conflict detected. See logs for details'),
      refusal(400, 'Database operation failed'),
      refusal(500, 'unknown_error'),
      new Error('socket hang up'),
    ]) {
      const probe = presentAfter(2);
      await expect(madeOrPresent(() => Promise.reject(refused), probe.isPresent)).resolves.toBe(
        false,
      );
      expect(probe.calls).toBe(2);
    }
  });

  it('answers a refusal no twin can explain at once, as it came (no 5 s of looking)', async () => {
    for (const refused of [
      refusal(403, 'HTTP 403 Forbidden'),
      refusal(400, 'Invalid value for accessTokenLifespan'),
      refusal(401, 'HTTP 401 Unauthorized'),
    ]) {
      const probe = presentAfter(Infinity);
      const started = Date.now();
      await expect(madeOrPresent(() => Promise.reject(refused), probe.isPresent)).rejects.toBe(
        refused,
      );
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(probe.calls).toBe(0);
    }
  });
});
