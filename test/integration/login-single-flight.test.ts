import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The password grants a replica has made, read from its own metrics. */
async function grantsOf(replica: Replica): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)).text();
  let grants = 0;
  for (const match of text.matchAll(
    /^realmgate_keycloak_requests_total\{kind="grant",[^}]*\} (\d+)/gm,
  )) {
    grants += Number(match[1]);
  }
  return grants;
}

/**
 * A cold burst of identical Basic requests spread over two replicas: with Redis, one replica
 * asks Keycloak and the other waits for its cached login; without Redis, one grant per replica.
 */
describe('one password grant per cold burst across replicas', () => {
  let replicas: Replica[] = [];

  afterEach(async () => {
    await Promise.all(replicas.map((replica) => replica.gateway.close()));
    replicas = [];
    await closeTestDb();
  });

  async function burst(shared: Record<string, string>): Promise<number> {
    replicas = [await startReplica(18830, shared), await startReplica(18840, shared)];
    const org = await createOrganization(['ws1']);
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const before = await Promise.all(replicas.map(grantsOf));
    const statuses = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        fetch(`${replicas[i % 2]!.url}/api/${org}/platform/workspaces`, {
          headers: { authorization: basicAuth(user) },
        }).then(async (res) => {
          await res.arrayBuffer();
          return res.status;
        }),
      ),
    );
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    const after = await Promise.all(replicas.map(grantsOf));
    return after[0]! - before[0]! + after[1]! - before[1]!;
  }

  it('makes exactly one grant when the replicas share Redis', async () => {
    const grants = await burst({
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `realmgate-flight:${randomBytes(4).toString('hex')}:`,
      REALMGATE_CACHE_SECRET: randomBytes(32).toString('base64url'),
    });
    expect(grants).toBe(1);
  });

  it('makes one grant per replica without Redis', async () => {
    expect(await burst({})).toBe(2);
  });
});
