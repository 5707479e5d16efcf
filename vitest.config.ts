import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two test files at a time at least: vitest's default (one fewer than the cores) is one on a
    // 2-core machine, and the integration files spend most of their time waiting for Keycloak,
    // so two in flight take `npm test` from about 30 minutes to about 16 there. Each file makes
    // its own realms, users and replicas; none may assume it runs alone.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // A bound on a stuck test, not on speed: the property tests (fast-check's hundreds of
          // runs) take 5-12 s beside two integration files on a loaded 2-core machine, past
          // vitest's 5 s default.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // Starts the real Keycloak and the gateway once; suites create their own realms and users.
          globalSetup: ['test/helpers/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 240_000,
        },
      },
      {
        test: {
          // `npm run test:ha` only: `npm test` names the two projects above.
          name: 'ha',
          include: ['test/ha/**/*.test.ts'],
          // One file, one stack, its phases in order (vitest runs a file's tests one by one).
          testTimeout: 240_000,
          hookTimeout: 420_000,
        },
      },
      {
        test: {
          // `npm run test:compose` only: docker-compose.yml's stacks, one a file, one after
          // the other (each publishes ports 8000 and 8001), phases in order.
          name: 'compose',
          include: ['test/compose/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 240_000,
          hookTimeout: 900_000,
          env: {
            TESTCONTAINERS_RYUK_DISABLED: 'true',
            // Published ports are checked there: the admin listener is bound to 127.0.0.1
            // only, which `localhost` (::1 first) would not reach.
            TESTCONTAINERS_HOST_OVERRIDE: '127.0.0.1',
          },
        },
      },
      {
        test: {
          // `npm run test:swarm` only (.ci/swarm-suite): ops/swarm/stack.yml on three hosts
          // that test/swarm/hosts.sh makes on this machine; one file, phases in order.
          name: 'swarm',
          include: ['test/swarm/**/*.test.ts'],
          testTimeout: 900_000,
          hookTimeout: 1_200_000,
          env: {
            // HAProxy on host 1 (test/swarm/hosts.sh's addresses).
            STACK_PUBLIC_URL: 'http://10.231.44.11:8000',
            STACK_ADMIN_URL: 'http://10.231.44.11:8001',
          },
        },
      },
      {
        test: {
          // `npm run test:keycloak-patch` only, by hand (docs/operations.md, "Upgrading
          // Keycloak"): Keycloak moved node by node on the production profile, from the image
          // KEYCLOAK_PREVIOUS_IMAGE names to KEYCLOAK_IMAGE. Not in CI: about 10 minutes, and an
          // image of another Keycloak version to build.
          name: 'keycloak-patch',
          include: ['test/compose/keycloak-patch.trial.ts'],
          testTimeout: 1_200_000,
          hookTimeout: 900_000,
          env: {
            TESTCONTAINERS_RYUK_DISABLED: 'true',
            TESTCONTAINERS_HOST_OVERRIDE: '127.0.0.1',
          },
        },
      },
    ],
  },
});
