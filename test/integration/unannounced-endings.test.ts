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

/** Waits for the re-checking replica to refuse `token`; prints the time from `started`. */
async function refusedAtRecheck(what: string, realm: string, token: string, started: number) {
  await expect.poll(() => status(rechecking, realm, token), EVENTUALLY).toBe(401);
  const ms = Math.round(performance.now() - started);
  console.log(
    `not announced, ${what}: refused at the re-check (REVOCATION_CHECK_SECONDS=${RECHECK_SECONDS}) after ${ms} ms`,
  );
}

describe('what Keycloak does not announce ends at the re-check', () => {
  it("a realm's not-before set in Keycloak directly", async () => {
    const realm = await createOrganization(['ws']);
    const token = await grantAtKeycloak(await createUser(realm));
    expect(await status(announced, realm, token)).toBe(200);
    expect(await status(rechecking, realm, token)).toBe(200);
    const started = performance.now();
    const admin = await keycloakAdmin();
    await admin.realms.update({ realm }, { notBefore: Number(claimsOf(token).iat) + 1 });
    await refusedAtRecheck('realm not-before', realm, token, started);
    // No logout token came: the replica that only hears Keycloak's announcements serves it.
    expect(await status(announced, realm, token)).toBe(200);
  });

  it('a realm\'s "sign out all active sessions" in Keycloak directly (it sets the not-before)', async () => {
    const realm = await createOrganization(['ws']);
    const token = await grantAtKeycloak(await createUser(realm));
    expect(await status(announced, realm, token)).toBe(200);
    expect(await status(rechecking, realm, token)).toBe(200);
    const started = performance.now();
    const admin = await keycloakAdmin();
    await admin.realms.logoutAll({ realm });
    await refusedAtRecheck('realm sign out all', realm, token, started);
    expect(await status(announced, realm, token)).toBe(200);
  });

  it('a user disabled in Keycloak directly', async () => {
    const user = await createUser(org);
    const token = await grantAtKeycloak(user);
    expect(await status(announced, org, token)).toBe(200);
    expect(await status(rechecking, org, token)).toBe(200);
    const started = performance.now();
    const admin = await keycloakAdmin();
    await admin.users.update({ realm: org, id: await userIdOf(user) }, { enabled: false });
    await refusedAtRecheck('user disabled', org, token, started);
    expect(await status(announced, org, token)).toBe(200);
  });
});
