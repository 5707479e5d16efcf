import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { expectDocumentedFailure } from '../helpers/documented-answer.ts';
import { dpopKey, dpopProof, type DpopKey } from '../helpers/dpop.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopRefusals, startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

// DPOP_NONCE across two replicas sharing Redis and the gateway's own secret, nothing at run time
// about nonces: a nonce one replica gives is taken by the other, a proof is still used once, and
// the CLI passes them.

describe('server nonces (DPOP_NONCE) across two replicas', () => {
  const settings = {
    DPOP_NONCE: 'true',
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    // The gateway's own secret, which replicas share (the chart requires it): the nonces' key.
    REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
  };
  const { publicUrl } = testEnv();
  let replicaA: Replica;
  let replicaB: Replica;
  let org: string;
  let member: TestUser;
  let key: DpopKey;
  let access: string;
  let root: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    [replicaA, replicaB] = await Promise.all([
      startReplica(19620, settings),
      startReplica(19630, settings),
    ]);
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
    const tokenUrl = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const grant = await postToken(`${replicaA.url}/auth`, org, passwordGrantBody(member), {
      dpop: await dpopProof(key, { method: 'POST', url: tokenUrl }),
    });
    expect(grant.status).toBe(200);
    access = String(grant.json.access_token);
    root = await mkdtemp(join(tmpdir(), 'realmgate-dpop-nonce-'));
  });
  afterAll(async () => {
    await Promise.all([replicaA?.gateway.close(), replicaB?.gateway.close()]);
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  async function call(replica: Replica, nonce?: string, proof?: string) {
    const made =
      proof ??
      (await dpopProof(key, {
        method: 'GET',
        url: `${publicUrl}${path()}`,
        accessToken: access,
        claims: { nonce },
      }));
    const res = await fetch(`${replica.url}${path()}`, {
      headers: { authorization: `DPoP ${access}`, dpop: made },
    });
    const body = (await res.json()) as Record<string, unknown>;
    return { status: res.status, body, headers: res.headers, proof: made };
  }

  it('asks for its nonce, which the other replica takes; a proof is still used once', async () => {
    const asked = await call(replicaA);
    expect(asked).toMatchObject({ status: 401, body: { result: '401-00002' } });
    expect(asked.headers.get('www-authenticate')).toContain('error="use_dpop_nonce"');
    const nonce = asked.headers.get('dpop-nonce');
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expectDocumentedFailure('listWorkspaces', asked);

    const served = await call(replicaB, nonce!);
    expect(served.status, JSON.stringify(served.body)).toBe(200);
    const replayed = await call(replicaA, undefined, served.proof);
    expect(replayed.status).toBe(401);
    expect(replayed.headers.get('www-authenticate')).toContain('error="invalid_dpop_proof"');
    expect(replayed.body.message).toBe('This DPoP proof was used before.');

    // A made-up nonce is answered with the real one again.
    const wrong = await call(replicaB, 'A'.repeat(22));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('dpop-nonce')).toBe(nonce);
  });

  it("keys its nonces with the gateway's own secret, not the client secret every realm holds", async () => {
    // The same KEYCLOAK_CLIENT_SECRET (the `realmgate-gateway` client's, readable in any realm),
    // another REALMGATE_CACHE_SECRET: its nonces are not the fleet's.
    const stranger = await startReplica(19640, {
      ...settings,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
    try {
      const [fleet, other] = await Promise.all([call(replicaA), call(stranger)]);
      expect(other.headers.get('dpop-nonce')).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(other.headers.get('dpop-nonce')).not.toBe(fleet.headers.get('dpop-nonce'));
      const refused = await call(stranger, fleet.headers.get('dpop-nonce')!);
      expect(refused.headers.get('www-authenticate')).toContain('error="use_dpop_nonce"');
    } finally {
      await stranger.gateway.close();
    }
  });

  it('the CLI answers the challenge with a proof carrying the nonce', async () => {
    const configDir = join(root, 'cli');
    const env = { REALMGATE_URL: replicaA.url, REALMGATE_CONFIG_DIR: configDir };
    const loggedIn = capturingIo(piped(`${member.password}\n`));
    const login = ['login', org, member.username, '--password-stdin'];
    expect(await runCli(login, env, loggedIn.io), loggedIn.output.stderr).toBe(0);
    const summary = JSON.parse(loggedIn.output.stdout) as { session_id: string; dpop_jkt: unknown };
    expect(summary.dpop_jkt).toEqual(expect.any(String));
    // A bound call through the replica that asks for nonces: asked (counted), then served with
    // the CLI's second proof.
    const asked = await dpopRefusals(replicaA, 'nonce_required');
    const listed = capturingIo();
    expect(await runCli(['tokens', 'list'], env, listed.io), listed.output.stderr).toBe(0);
    const tokens = JSON.parse(listed.output.stdout) as Array<{ id: string; dpop_jkt: unknown }>;
    expect(tokens).toContainEqual(
      expect.objectContaining({ id: summary.session_id, dpop_jkt: summary.dpop_jkt }),
    );
    expect(await dpopRefusals(replicaA, 'nonce_required')).toBe(asked + 1);
  });
});
