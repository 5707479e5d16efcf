import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { accessTokenOf, basicAuth, callApi } from '../helpers/api.ts';
import { dpopKey, dpopProof, postForm, type DpopKey } from '../helpers/dpop.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  type TestUser,
} from '../helpers/keycloak.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * An organization whose realm was deleted in Keycloak itself (its console, its admin API) while
 * the organization stays in PostgreSQL, against the real Keycloak: every route kind answers the
 * client's problem (401 naming the missing realm, or Keycloak's own answer through `/auth`),
 * never a 5xx, and none of it counts as Keycloak failing: other organizations are served, the
 * replica stays ready, and no call is counted as a bad answer.
 */

const REALM_GONE = "The organization's realm does not exist in Keycloak.";
const workspacesPath = (org: string) => `/api/${org}/platform/workspaces`;

let replica: Replica;
let org: string;
let member: TestUser;
let tokenBefore: string;
let other: TestUser;
let key: DpopKey;
let boundBefore: string;
/** The replica's failed Keycloak calls by outcome once its start-up pass was over. */
let failuresBefore: Record<string, number>;
const FAILURES = ['bad_answer', 'unreachable', 'timeout'];
const tokenUrl = (realm: string) =>
  `${testEnv().publicUrl}/auth/realms/${realm}/protocol/openid-connect/token`;
beforeAll(async () => {
  // The key set held when the realm goes is dropped at its next fetch (KEY_SET_REFRESH_SECONDS).
  replica = await startReplica(21070, {
    REVOCATION_CHECK_SECONDS: 'off',
    KEY_SET_REFRESH_SECONDS: '2',
  });
  org = await createOrganization(['ws-a']);
  member = await createUser(org, { workspaceRoles: ['ws-a'] });
  tokenBefore = await accessTokenOf(member);
  key = await dpopKey();
  const bound = await postForm(replica.url, tokenUrl(org), passwordGrantBody(member), key);
  expect(bound.json.token_type).toBe('DPoP');
  boundBefore = String(bound.json.access_token);
  const otherOrg = await createOrganization(['ws-a']);
  other = await createUser(otherOrg, { workspaceRoles: ['ws-a'] });
  // The gateway has seen the realm (its key set) before the realm goes.
  const seen = await callApi(workspacesPath(org), `Bearer ${tokenBefore}`, { base: replica.url });
  expect(seen.status).toBe(200);
  await (await keycloakAdmin()).realms.del({ realm: org });
  // The replica's start-up pass over every realm of the shared Keycloak (admin-API calls of no
  // request, a loaded machine may time one out) is over before the tests' own calls are counted.
  const alignmentPending = async () =>
    (
      (await (await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`)).json()) as {
        data: { backchannel_logout: { pending?: true } };
      }
    ).data.backchannel_logout.pending;
  await vi.waitFor(async () => expect(await alignmentPending()).toBeUndefined(), {
    ...EVENTUALLY,
    timeout: 4 * EVENTUALLY.timeout,
  });
  failuresBefore = await keycloakFailures();
});
afterAll(async () => {
  await replica?.gateway.close();
  await closeTestDb();
});

/** `keycloakCalls` of each failed outcome. */
async function keycloakFailures(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const outcome of FAILURES) counts[outcome] = await keycloakCalls(outcome);
  return counts;
}

/** `realmgate_keycloak_requests_total` of `outcome`, summed over the kinds. */
async function keycloakCalls(outcome: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('realmgate_keycloak_requests_total{'))
    .filter((line) => line.includes(`outcome="${outcome}"`))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe('an organization whose realm was deleted in Keycloak', () => {
  it('answers a Basic login 401 naming the missing realm, not 502', async () => {
    const res = await callApi(workspacesPath(org), basicAuth(member), { base: replica.url });
    expect(res.status).toBe(401);
    expect(res.body.result).toBe('401-00002');
    expect(res.body.message).toBe(REALM_GONE);
    expect(res.headers.get('www-authenticate')).toMatch(/^Basic /);
  });

  it('answers a Bearer token issued before the deletion 401 naming the missing realm', async () => {
    const call = () => callApi(workspacesPath(org), `Bearer ${tokenBefore}`, { base: replica.url });
    await expect.poll(async () => (await call()).body.message, EVENTUALLY).toBe(REALM_GONE);
    const res = await call();
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /);
  });

  it('answers a DPoP-bound token issued before the deletion 401 naming the missing realm', async () => {
    const path = workspacesPath(org);
    const call = async () => {
      const proof = await dpopProof(key, {
        method: 'GET',
        url: `${testEnv().publicUrl}${path}`,
        accessToken: boundBefore,
      });
      return callApi(path, `DPoP ${boundBefore}`, { base: replica.url, headers: { dpop: proof } });
    };
    await expect.poll(async () => (await call()).body.message, EVENTUALLY).toBe(REALM_GONE);
    const res = await call();
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^DPoP /);
  });

  it('answers the refresh-token API and the audit log 401 naming the missing realm', async () => {
    for (const path of [
      `/api/${org}/platform/users/_current/refresh_tokens`,
      `/api/${org}/platform/audit-log`,
    ]) {
      const res = await callApi(path, basicAuth(member), { base: replica.url });
      expect(res.status).toBe(401);
      expect(res.body.message).toBe(REALM_GONE);
    }
  });

  it("passes Keycloak's own 404 through /auth, job credentials included, never a 5xx", async () => {
    for (const extra of ['', '&realmgate_name=nightly&realmgate_workspaces=ws-a']) {
      const res = await postForm(replica.url, tokenUrl(org), passwordGrantBody(member, extra));
      expect(res.status).toBe(404);
      expect(res.json.error).toBe('Realm does not exist');
    }
  });

  it('counts no Keycloak failure and costs other organizations nothing', async () => {
    await callApi(workspacesPath(org), basicAuth(member), { base: replica.url });
    // None in the calls of the tests above and this one.
    expect(await keycloakFailures()).toEqual(failuresBefore);
    const ready = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`);
    expect(ready.status).toBe(200);
    const served = await callApi(workspacesPath(other.realm), basicAuth(other), {
      base: replica.url,
    });
    expect(served.status).toBe(200);
  });
});
