import { beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { seconds, timeUntil } from '../ha/measure.ts';
import {
  balancerServes,
  loadFigures,
  newSecret,
  productionFixture,
  underLoad,
} from './production-load.ts';
import { type ComposeStack } from './stack.ts';
import { apiCall, printFigures, tokenGrant } from './walk.ts';

/*
 * Keycloak moved to a newer patch on the production profile, node by node, under load (issue 39,
 * item 5; docs/operations.md, "Upgrading Keycloak"): the stack started with
 * KEYCLOAK_PREVIOUS_IMAGE, then each node recreated with KEYCLOAK_IMAGE (`up -d --no-deps
 * keycloak-N`), the next only once the one before is healthy. Run by hand, as root, with the
 * images built (the compose suite's):
 *
 *   set -a; . ops/images/local-images.env; set +a
 *   KEYCLOAK_PREVIOUS_IMAGE=realmgate-local/keycloak:26.7.3 npm run test:keycloak-patch
 */

const FROM = process.env.KEYCLOAK_PREVIOUS_IMAGE ?? '';
const TO = process.env.KEYCLOAK_IMAGE ?? '';
const fixture = productionFixture('kcpatch');
const { org, users, forwardedPath } = fixture;
const newcomer = { username: 'newcomer', password: newSecret() };

let stack: ComposeStack;

async function healthy(service: string, since: number): Promise<number> {
  const health = async () =>
    (await stack.compose('ps', '--format', '{{.Health}}', service).catch(() => '')).trim();
  await expect.poll(health, { timeout: 400_000, interval: 1000 }).toBe('healthy');
  return (performance.now() - since) / 1000;
}

describe(`Keycloak ${FROM} -> ${TO}, node by node, under load`, () => {
  beforeAll(async () => {
    expect(FROM, 'KEYCLOAK_PREVIOUS_IMAGE: the Keycloak image to start from').not.toBe('');
    expect(TO, 'KEYCLOAK_IMAGE: the Keycloak image to move to').not.toBe('');
    stack = await fixture.startStack({ environment: { KEYCLOAK_IMAGE: FROM }, build: false });
    await balancerServes();
    await fixture.makeOrganization('Keycloak patch', [newcomer]);
  }, 900_000);

  it('no failed request; logins, an offline session from before and a new Basic login after', async () => {
    const offline = await tokenGrant(org, {
      grant_type: 'password',
      scope: 'openid offline_access',
      ...users[1]!,
    });
    expect(offline.status).toBe(200);
    const took: Record<string, string> = {};
    const logins: Record<string, string> = {};
    const { result, haproxy } = await underLoad(stack, fixture, 1200, async () => {
      for (const node of ['keycloak-1', 'keycloak-2']) {
        const since = performance.now();
        stack.environment.KEYCLOAK_IMAGE = TO;
        await stack.compose('up', '-d', '--no-deps', node);
        // While it starts: a password grant through the other node (the first one to succeed).
        const login = await timeUntil(
          since,
          async () =>
            (await tokenGrant(org, { grant_type: 'password', scope: 'openid', ...users[0]! }))
              .status,
          (status) => status === 200,
          30_000,
        );
        logins[`password grant while ${node} restarts`] =
          `${seconds(login.ms)} (${login.tries} tries: ${login.failures.join(', ') || 'none failed'})`;
        expect(login.ms).toBeDefined();
        took[`${node} on ${TO}, healthy after`] = `${(await healthy(node, since)).toFixed(1)} s`;
      }
    });
    const refreshed = await tokenGrant(org, {
      grant_type: 'refresh_token',
      refresh_token: offline.json.refresh_token,
    });
    const basic = await apiCall(forwardedPath, basicAuth(newcomer));
    printFigures(`Keycloak ${FROM} -> ${TO}, node by node`, {
      ...loadFigures(result, haproxy.served),
      ...took,
      ...logins,
      'offline session from before, refreshed after': refreshed.status,
      'first Basic login of a new user after': basic.status,
      'HAProxy state changes': haproxy.stateChanges.join('; ') || 'none',
    });
    expect(result.bad).toBe(0);
    expect(refreshed.status).toBe(200);
    expect(basic.status).toBe(200);
  }, 1_200_000);
});
