import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dpopKey, dpopProof, type DpopKey } from '../helpers/dpop.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopRefusals, startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

// A gateway without Redis keeps used proofs in its memory, bounded by MEMORY_CACHE_MAX_ENTRIES
// (32 here: past 16 held, a key holding 2 gets no more): one key flooding fresh proofs is
// refused for what it is, counted as such, and another caller's proofs still pass.

describe('the in-process record of used DPoP proofs, one key flooding it', () => {
  const { publicUrl } = testEnv();
  let replica: Replica;
  let org: string;
  const path = () => `/api/${org}/platform/workspaces`;

  async function bound(user: TestUser, key: DpopKey): Promise<string> {
    const url = `${publicUrl}/auth/realms/${user.realm}/protocol/openid-connect/token`;
    const grant = await postToken(`${replica.url}/auth`, user.realm, passwordGrantBody(user), {
      dpop: await dpopProof(key, { method: 'POST', url }),
    });
    expect(grant.status, JSON.stringify(grant.json)).toBe(200);
    return String(grant.json.access_token);
  }

  async function call(key: DpopKey, access: string) {
    const proof = await dpopProof(key, {
      method: 'GET',
      url: `${publicUrl}${path()}`,
      accessToken: access,
    });
    const res = await fetch(`${replica.url}${path()}`, {
      headers: { authorization: `DPoP ${access}`, dpop: proof },
    });
    return {
      status: res.status,
      challenge: res.headers.get('www-authenticate') ?? '',
      body: (await res.json()) as { message?: string },
    };
  }

  beforeAll(async () => {
    replica = await startReplica(19666, { MEMORY_CACHE_MAX_ENTRIES: '32' });
    org = await createOrganization(['ws1']);
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it('refuses the flooding key past its share, saying so, and serves another key', async () => {
    const [flooder, caller] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(org, { workspaceRoles: ['ws1'] }),
    ]);
    const [floodKey, callerKey] = await Promise.all([dpopKey(), dpopKey()]);
    const [floodAccess, callerAccess] = [
      await bound(flooder, floodKey),
      await bound(caller, callerKey),
    ];
    const before = await dpopRefusals(replica, 'proof_key_share');
    let served = 0;
    let refused: Awaited<ReturnType<typeof call>> | undefined;
    while (refused === undefined && served < 32) {
      const answer = await call(floodKey, floodAccess);
      if (answer.status === 200) served++;
      else refused = answer;
    }
    expect(served).toBe(16);
    expect(refused).toMatchObject({ status: 401 });
    expect(refused!.challenge).toContain('error="invalid_dpop_proof"');
    expect(refused!.body.message).toMatch(/share for one key; retry with a new proof/);
    expect(refused!.body.message).not.toMatch(/used before/);
    expect(await dpopRefusals(replica, 'proof_key_share')).toBe(before + 1);

    expect((await call(callerKey, callerAccess)).status).toBe(200);
    expect((await call(callerKey, callerAccess)).status).toBe(200);
  });
});
