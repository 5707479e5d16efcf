import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/database-failures.ts';
import { createOrganizationDirectory } from '../../src/platform/organization-directory.ts';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { manualClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * PostgreSQL out of connection slots (`max_connections` reached, or the role's `CONNECTION
 * LIMIT`: SQLSTATE 53300) cannot be asked, as when it is down: the real server refuses a role
 * whose limit is 0 the way it refuses everyone once full.
 */
describe('platform database out of connection slots', () => {
  const suffix = randomBytes(4).toString('hex');
  const role = `realmgate_slots_${suffix}`;
  const organization = `slots-${suffix}`;
  const database = new URL(testEnv().databaseUrl);
  const server = `${database.protocol}//${database.username}@${database.host}`;
  let full: Knex;

  beforeAll(async () => {
    await onPostgresServer(server, `create role ${role} login connection limit 0`);
    const url = new URL(database.href);
    url.username = role;
    url.password = '';
    full = knex({ client: 'pg', connection: url.href, pool: { min: 0, max: 1 } });
    await createOrganizationsRepo(testDb()).insertIfAbsent({ id: organization, name: 'Slots' });
  });

  afterAll(async () => {
    await full?.destroy();
    await testDb()('organizations').where({ id: organization }).del();
    await closeTestDb();
    await onPostgresServer(server, `drop role if exists ${role}`);
  });

  it('is the database unavailable (503 503-00003), not an unexpected failure', async () => {
    const failure = await full.raw('select 1').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: '53300' });
    expect(isDatabaseUnavailable(failure)).toBe(true);
  });

  it('leaves an organization confirmed before served, as with the database down', async () => {
    const clock = manualClock(Date.now());
    let repo = createOrganizationsRepo(testDb());
    const directory = createOrganizationDirectory({ find: (id) => repo.find(id) }, clock);
    expect(await directory.stateOf(organization)).toBe('enabled');
    repo = createOrganizationsRepo(full);
    // Past the minute a confirmation is trusted: the next request asks the database again.
    clock.advance(61_000);
    expect(await directory.stateOf(organization)).toBe('enabled');
  });
});
