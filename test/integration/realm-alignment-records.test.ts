import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ensureOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { GATEWAY_AUDIENCE_MAPPER } from '../../src/platform/realm-admin/gateway-audience.ts';
import { RECHECK_AFTER_SECONDS, STEPS_VERSION } from '../../src/platform/realm-alignment.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import {
  createUser,
  keycloakAdmin,
  testBackchannelUrl,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A replica's start aligns every realm of Keycloak (realm-alignment.ts), and records each one it
 * found aligned in `realm_alignments`: the next start, of any replica, reads no realm recorded
 * for its back-channel URL and steps. Every replica here talks to the shared Keycloak through a
 * front that records each admin request, so the reads of each start can be counted.
 */
let front: KeycloakFront;
beforeAll(async () => {
  front = await startKeycloakFront(testEnv().keycloakUrl);
});
afterAll(async () => {
  await front?.close();
  await closeTestDb();
});

interface AlignmentRow {
  realm_id: string;
  realm: string;
  url: string;
  steps_version: number;
}

/** Starts a replica through the front and waits until its alignment pass is over. */
async function startAligned(port: number): Promise<Replica> {
  const replica = await startReplica(port, { KEYCLOAK_URL: front.url });
  const pending = async () =>
    (
      (await (await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`)).json()) as {
        data: { backchannel_logout: { pending?: true } };
      }
    ).data.backchannel_logout.pending;
  await vi.waitFor(async () => expect(await pending()).toBeUndefined(), EVENTUALLY);
  return replica;
}

/** The realms whose clients or client scopes the front saw read since it was emptied. */
function realmsRead(): Set<string> {
  const read = new Set<string>();
  for (const { target } of front.seen) {
    const match = /\/admin\/realms\/([^/?]+)\/(?:clients|client-scopes)(?:[?]|$)/.exec(target);
    if (match) read.add(decodeURIComponent(match[1]!));
  }
  return read;
}

/** The realms recorded as aligned for the test URL and the current steps: name to id. */
async function recorded(): Promise<Map<string, string>> {
  const rows: { realm: string; realm_id: string }[] = await testDb()('realm_alignments')
    .where({ url: testBackchannelUrl(), steps_version: STEPS_VERSION })
    .andWhereRaw('aligned_at > now() - make_interval(secs => ?)', [RECHECK_AFTER_SECONDS])
    .select('realm', 'realm_id');
  return new Map(rows.map((row) => [row.realm, row.realm_id]));
}

/** Every realm of Keycloak now: name to id. */
async function realmIds(): Promise<Map<string, string>> {
  const realms = await (await keycloakAdmin()).realms.find({ briefRepresentation: true });
  return new Map(realms.map((realm) => [realm.realm!, realm.id!]));
}

/** A realm made as before realmgate set the URL: nothing of the alignment in it. */
async function makeUnaligned(realm: string): Promise<void> {
  await ensureOrganizationRealm(await keycloakAdmin(), {
    organizationId: realm,
    organizationName: realm,
    gatewayClientSecret: testEnv().gatewayClientSecret,
  });
  const admin = await keycloakAdmin();
  const basic = (await admin.clientScopes.find({ realm })).find((s) => s.name === 'basic')!;
  for (const mapper of basic.protocolMappers ?? []) {
    if (mapper.name !== GATEWAY_AUDIENCE_MAPPER) continue;
    await admin.clientScopes.delProtocolMapper({ realm, id: basic.id!, mapperId: mapper.id! });
  }
}

/** Whether the realm's API client points at the test URL and `basic` has the gateway mapper. */
async function alignedInKeycloak(realm: string): Promise<boolean> {
  const admin = await keycloakAdmin();
  const api = (await admin.clients.find({ realm, clientId: apiClientIdOf(realm) }))[0];
  const basic = (await admin.clientScopes.find({ realm })).find((s) => s.name === 'basic');
  return (
    api?.attributes?.['backchannel.logout.url'] === testBackchannelUrl() &&
    (basic?.protocolMappers ?? []).some((mapper) => mapper.name === GATEWAY_AUDIENCE_MAPPER)
  );
}

const idOf = async (realm: string) =>
  (await (await keycloakAdmin()).realms.findOne({ realm }))!.id!;

describe("a replica's start reads only the realms not recorded as aligned", () => {
  it('aligns and records a realm made unaligned; the next start reads no recorded realm', async () => {
    const realm = uniqueId('org-');
    await makeUnaligned(realm);
    expect(await alignedInKeycloak(realm)).toBe(false);

    const first = await startAligned(21136);
    await first.gateway.close();
    // Aligned and recorded by its id, whichever replica of the shared suite got there first.
    expect(await alignedInKeycloak(realm)).toBe(true);
    const [row] = await testDb()<AlignmentRow>('realm_alignments').where({ realm });
    expect(row).toMatchObject({
      realm_id: await idOf(realm),
      url: testBackchannelUrl(),
      steps_version: STEPS_VERSION,
    });

    const before = await recorded();
    front.seen.length = 0;
    const second = await startAligned(21136);
    await second.gateway.close();
    const listings = front.seen.filter(({ target }) => /\/admin\/realms\/?(?:[?]|$)/.test(target));
    expect(listings.map(({ target }) => target)).toEqual([
      expect.stringContaining('briefRepresentation=true'),
    ]);
    // Realms other suites made since may be read (or made again under a recorded name: another
    // id); none recorded before the start is.
    const read = [...realmsRead()];
    const now = await realmIds();
    expect(read.filter((name) => before.has(name) && before.get(name) === now.get(name))).toEqual(
      [],
    );
    expect(read).not.toContain(realm);
    console.log(
      `realm alignment: second start read ${read.length} of ${now.size} realms; ` +
        `${front.seen.length} requests to Keycloak in all`,
    );
  });

  it('aligns a realm deleted and made again under the same name, and records its new id', async () => {
    const realm = uniqueId('org-');
    await makeUnaligned(realm);
    const replica = await startAligned(21136);
    await replica.gateway.close();
    const formerId = await idOf(realm);
    expect((await recorded()).get(realm)).toBe(formerId);

    const admin = await keycloakAdmin();
    await admin.realms.del({ realm });
    await makeUnaligned(realm);
    const newId = await idOf(realm);
    expect(newId).not.toBe(formerId);
    expect(await alignedInKeycloak(realm)).toBe(false);

    front.seen.length = 0;
    const again = await startAligned(21136);
    await again.gateway.close();
    expect(await alignedInKeycloak(realm)).toBe(true);
    const [row] = await testDb()<AlignmentRow>('realm_alignments').where({ realm_id: newId });
    expect(row).toMatchObject({ realm, url: testBackchannelUrl() });
  });

  it('an organization made through the API is recorded at once: no start reads it', async () => {
    const replica = await startAligned(21136);
    try {
      const admin: TestUser = await createUser('master');
      const id = uniqueId('org-');
      const res = await fetch(`${replica.url}/api/platform/organizations`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Basic ${Buffer.from(`${admin.username}:${admin.password}`).toString('base64')}`,
        },
        body: JSON.stringify({ id, name: 'Recorded' }),
      });
      expect(res.status).toBe(200);
      const [row] = await testDb()<AlignmentRow>('realm_alignments').where({ realm: id });
      expect(row).toMatchObject({
        realm_id: await idOf(id),
        url: testBackchannelUrl(),
        steps_version: STEPS_VERSION,
      });
    } finally {
      await replica.gateway.close();
    }
  });
});
