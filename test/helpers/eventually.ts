/**
 * How long the integration tests wait for an event (a replica refusing a revoked token, a node
 * shown up again): far longer than it takes even on a loaded machine, so that only an event that
 * never comes fails a test. How fast such events come is a figure the HA suite prints (test/ha/),
 * not a bound these tests assert. For `expect.poll` and `vi.waitFor`.
 */
export const EVENTUALLY = { timeout: 30_000, interval: 50 } as const;
