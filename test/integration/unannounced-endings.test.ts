import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  userIdOf,
  grantAtKeycloak,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

// What Keycloak ends without announcing it (no logout token): the re-check is what ends it.
// Replica `announced` shares the test gateway's Redis prefix (where Keycloak's logout tokens
// are applied) and never re-checks; replica `rechecking` has a Redis prefix of its own (no
// logout token reaches it) and re-checks every token every 2 s. Each change is made on
// Keycloak's own port.

const RECHECK_SECONDS = 2;
let announced: Replica;
let rechecking: Replica;
let org: string;

beforeAll(async () => {
  [announced, rechecking] = await Promise.all([
    startReplica(19454, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
      REVOCATION_CHECK_SECONDS: 'off',
    }),
    startReplica(19456, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `realmgate-unannounced:${randomBytes(4).toString('hex')}:`,
      REVOCATION_CHECK_SECONDS: String(RECHECK_SECONDS),
    }),
  ]);
  org = await createOrganization(['ws']);
});
afterAll(async () => {
  await Promise.all([announced?.gateway.close(), rechecking?.gateway.close()]);
  await closeTestDb();
});

async function status(replica: Replica, realm: string, token: string): Promise<number> {
  const res = await fetch(`${replica.url}/api/${realm}/platform/workspaces`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return res.status;
}

/**
 * `token`, served on both replicas, is refused by the re-checking one after `end` (done in
 * Keycloak directly), and still served by the one that only hears Keycloak's announcements: no
 * logout token came. Prints the time from `end` to the refusal.
 */
async function endedAtRecheckOnly(
  what: string,
  realm: string,
  token: string,
  end: () => Promise<unknown>,
) {
  expect(await status(announced, realm, token)).toBe(200);
  expect(await status(rechecking, realm, token)).toBe(200);
  const started = performance.now();
  await end();
  await expect.poll(() => status(rechecking, realm, token), EVENTUALLY).toBe(401);
  const ms = Math.round(performance.now() - started);
  console.log(
    `not announced, ${what}: refused at the re-check (REVOCATION_CHECK_SECONDS=${RECHECK_SECONDS}) after ${ms} ms`,
  );
  expect(await status(announced, realm, token)).toBe(200);
}

describe('what Keycloak does not announce ends at the re-check', () => {
  it("a realm's not-before set in Keycloak directly", async () => {
    const realm = await createOrganization(['ws']);
    const token = await grantAtKeycloak(await createUser(realm));
    const admin = await keycloakAdmin();
    await endedAtRecheckOnly('realm not-before', realm, token, () =>
      admin.realms.update({ realm }, { notBefore: Number(claimsOf(token).iat) + 1 }),
    );
  });

  it('a realm\'s "sign out all active sessions" in Keycloak directly (it sets the not-before)', async () => {
    const realm = await createOrganization(['ws']);
    const token = await grantAtKeycloak(await createUser(realm));
    const admin = await keycloakAdmin();
    await endedAtRecheckOnly('realm sign out all', realm, token, () =>
      admin.realms.logoutAll({ realm }),
    );
  });

  it('a user disabled in Keycloak directly', async () => {
    const user = await createUser(org);
    const token = await grantAtKeycloak(user);
    const admin = await keycloakAdmin();
    const id = await userIdOf(user);
    await endedAtRecheckOnly('user disabled', org, token, () =>
      admin.users.update({ realm: org, id }, { enabled: false }),
    );
  });
});
