import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  authorizeUrl,
  cookieHeaderOf,
  createBrowserClient,
  formActionOf,
} from '../helpers/browser-login.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { keycloakAdmin, uniqueId } from '../helpers/keycloak.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { takeTurns } from '../helpers/turns.ts';

/**
 * The bootstrap administrator's e-mail posted from an address past the login throttle's limit,
 * where the guard gets no account for it (the lookup holds a slot of that address's budget):
 * the guard answers the throttle's refusal itself. Left to the later throttle step, a login
 * page posting the name alone (identity-first: no password to count) reached Keycloak, which
 * tied the login to the administrator; its password page then took guesses from any address,
 * naming nobody. Master's login made identity-first for one client only (a flow binding), so
 * other suites' master logins stay as they are. Port 18576/18577.
 */
describe("the bootstrap administrator's e-mail from an address at the throttle's limit", () => {
  takeTurns('bootstrap-admin-email');
  const MASTER = 'master';
  let replica: Replica;
  let clientUuid: string;
  let flowId: string;
  let browserClient: string;

  beforeAll(async () => {
    replica = await startReplica(18576, { LOGIN_MAX_FAILURES_PER_ADDRESS: '2' });
    const admin = await keycloakAdmin();
    const alias = uniqueId('identity-first-');
    await admin.authenticationManagement.createFlow({
      realm: MASTER,
      alias,
      providerId: 'basic-flow',
      topLevel: true,
      builtIn: false,
    });
    for (const provider of ['auth-username-form', 'auth-password-form']) {
      await admin.authenticationManagement.addExecutionToFlow({
        realm: MASTER,
        flow: alias,
        provider,
      });
    }
    for (const execution of await admin.authenticationManagement.getExecutions({
      realm: MASTER,
      flow: alias,
    })) {
      await admin.authenticationManagement.updateExecution(
        { realm: MASTER, flow: alias },
        { ...execution, requirement: 'REQUIRED' },
      );
    }
    const flows = await admin.authenticationManagement.getFlows({ realm: MASTER });
    flowId = flows.find((flow) => flow.alias === alias)!.id!;
    browserClient = await createBrowserClient(MASTER);
    const [client] = await admin.clients.find({ realm: MASTER, clientId: browserClient });
    clientUuid = client!.id!;
    await admin.clients.update(
      { realm: MASTER, id: clientUuid },
      { ...client, authenticationFlowBindingOverrides: { browser: flowId } },
    );
  });

  afterAll(async () => {
    await replica?.gateway.close();
    const admin = await keycloakAdmin();
    if (clientUuid) await admin.clients.del({ realm: MASTER, id: clientUuid });
    if (flowId) await admin.authenticationManagement.deleteFlow({ realm: MASTER, flowId });
  });

  const tokenUrl = () => `${replica.url}/auth/realms/${MASTER}/protocol/openid-connect/token`;
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const grant = (address: string, username: string) =>
    requestFrom(address, tokenUrl(), {
      method: 'POST',
      headers: form,
      body: new URLSearchParams({
        client_id: 'admin-cli',
        grant_type: 'password',
        username,
        password: 'guess',
      }).toString(),
    });

  /** Master's identity-first login from `address`, up to its first page posting `username`. */
  async function postUsername(address: string, username: string) {
    const first = await requestFrom(address, authorizeUrl(replica.url, MASTER, browserClient));
    expect(first.status).toBe(200);
    expect(first.text).not.toMatch(/name="password"/);
    return requestFrom(address, formActionOf(replica.url, first.text), {
      method: 'POST',
      headers: { ...form, cookie: cookieHeaderOf(first.headers['set-cookie']) },
      body: new URLSearchParams({ username }).toString(),
    });
  }

  it('is refused by the guard: 429 on the identity-first page and the token endpoint', async () => {
    const admin = await keycloakAdmin();
    const name = testEnv().keycloakAdminUsername;
    const [account] = await admin.users.find({ realm: MASTER, username: name, exact: true });
    const email = `${uniqueId('bootstrap-')}@example.com`;
    await admin.users.update({ realm: MASTER, id: account!.id! }, { ...account, email });
    try {
      // The address's failures reach its limit: wrong passwords of made-up accounts.
      const address = '127.0.0.40';
      for (let i = 0; i < 2; i++) {
        expect((await grant(address, uniqueId('nobody-'))).status).toBe(401);
      }
      const named = await postUsername(address, email);
      expect([named.status, named.json.result]).toEqual([429, '429-00001']);
      expect(named.headers['retry-after']).toMatch(/^[1-9]\d*$/);
      expect(named.text).not.toMatch(/name="password"/);

      const granted = await grant(address, email);
      expect([granted.status, granted.json.error]).toEqual([429, 'too_many_attempts']);
      expect(granted.headers['retry-after']).toMatch(/^[1-9]\d*$/);

      // From another address the guard tells the e-mail's account: the administrator's.
      const told = await postUsername('127.0.0.41', email);
      expect([told.status, told.json.error]).toEqual([400, 'invalid_grant']);
      const status = await admin.attackDetection.findOne({ realm: MASTER, id: account!.id! });
      expect(Number(status?.numFailures ?? 0)).toBe(0);
    } finally {
      await admin.users.update({ realm: MASTER, id: account!.id! }, { ...account, email: '' });
    }
  });
});
