import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser, passwordGrantBody } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopKey, dpopProof, postForm, type DpopKey } from '../helpers/dpop.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A gateway without Redis keeps each proof's one-time use in its own memory, bounded by
 * MEMORY_CACHE_MAX_ENTRIES (small here): a caller with a bound token of its own sending fresh
 * proofs as fast as it can must not push out the record of another's proof, which a thief who
 * captured that proof (with its token) would then replay inside its window.
 */
describe('DPoP replays on a gateway without Redis, against a flood of fresh proofs', () => {
  const publicUrl = testEnv().publicUrl;
  const BOUND = 20;
  let gateway: Replica;
  let org: string;
  const platformPath = () => `/api/${org}/platform/workspaces`;

  /** A bound access token of a new member of `org`, and its key. */
  async function boundLogin(): Promise<{ key: DpopKey; token: string }> {
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    const key = await dpopKey();
    const url = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const answer = await postForm(gateway.url, url, passwordGrantBody(member), key);
    expect(answer.status).toBe(200);
    return { key, token: String(answer.json.access_token) };
  }

  const proofOf = ({ key, token }: { key: DpopKey; token: string }) =>
    dpopProof(key, { method: 'GET', url: `${publicUrl}${platformPath()}`, accessToken: token });

  async function call(login: { token: string }, proof: string) {
    const res = await fetch(`${gateway.url}${platformPath()}`, {
      headers: { authorization: `DPoP ${login.token}`, dpop: proof },
    });
    return { status: res.status, body: (await res.json()) as { result: string; message: string } };
  }

  beforeAll(async () => {
    gateway = await startReplica(19980, { MEMORY_CACHE_MAX_ENTRIES: String(BOUND) });
    org = await createOrganization(['ws1']);
  });

  afterAll(async () => {
    await gateway?.gateway.close();
    await closeTestDb();
  });

  it("refuses the replay of a captured proof after as many fresh proofs of another's key as the bound", async () => {
    const victim = await boundLogin();
    const captured = await proofOf(victim);
    expect((await call(victim, captured)).status).toBe(200);

    const sender = await boundLogin();
    for (let i = 0; i < BOUND; i++) await call(sender, await proofOf(sender));

    const replayed = await call(victim, captured);
    expect(replayed.status).toBe(401);
    expect(replayed.body.result).toBe('401-00002');
    expect(replayed.body.message).toMatch(/used before/);
  });
});
