import { execFile } from 'node:child_process';
import { promisify, stripVTControlCharacters } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { RELEASES, schemaVerdict, type SchemaVerdict } from '../../src/db/schema-history.ts';
import { SCHEMA_RECORD_TABLE } from '../../src/db/schema-record.ts';
import { MIGRATION_NAMES } from '../../src/db/migrate.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth } from '../helpers/api.ts';
import { previousRelease } from '../helpers/release-commit.ts';
import {
  backInRotation,
  balancerLog,
  balancerServes,
  loadFigures,
  newSecret,
  productionFixture,
  underLoad as underLoadOf,
} from './production-load.ts';
import { PUBLIC_URL, ROOT, type ComposeStack } from './stack.ts';
import { apiCall, printFigures, tokenGrant } from './walk.ts';

/*
 * A rolling upgrade on the production profile (docs/operations.md, "Upgrades and migrations"):
 * the stack started on the previous release's image (built here from its commit, `git archive`),
 * four things made with it (an organization, its workspace, a job credential, a revoked access
 * token), then under a steady load through HAProxy each gateway replica replaced by this
 * checkout's image, one at a time, as an operator does it with compose (REALMGATE_IMAGE, `up
 * --no-deps`); the first new replica migrates, if the checkout has migrations the release has
 * not. Then going back one release: done where the migration rule allows it, otherwise the old
 * replica's refusal at start, the load still served. What each step must show follows from the
 * two migration lists (released-migrations.json, migrate.ts) and the rule (schema-history.ts).
 */

const run = promisify(execFile);
const previous = previousRelease(ROOT, RELEASES);
const OLD_IMAGE = `realmgate:${previous.release.version}`;
/** The checkout's image, under the name docker-compose.yml builds it by default. */
const NEW_IMAGE = 'realmgate';
const REPLICAS = ['gateway-1', 'gateway-2'] as const;
/** The checkout's migrations the release does not have: what the first new replica applies. */
const NEWER = MIGRATION_NAMES.slice(previous.release.migrations.length);

const fixture = productionFixture('upgrade');
const { org, workspace: WORKSPACE, forwardedPath, secrets } = fixture;
/** Owns the job credential. */
const jobOwner = { username: 'job-owner', password: newSecret() };
/** Had an access token revoked (RFC 7009) before the upgrade. */
const revokedUser = { username: 'revoked', password: newSecret() };
const tokensPath = `/api/${org}/platform/users/_current/refresh_tokens`;

let stack: ComposeStack;
/** What was made on the previous release, checked after the upgrade. */
let jobRefreshToken: string;
let revokedAccessToken: string;

/** `git archive` of the release's commit, built as `image` (its own Dockerfile, our base image). */
async function buildImageOf(commit: string, image: string): Promise<number> {
  const since = performance.now();
  const nodeImage = process.env.NODE_IMAGE
    ? ['--build-arg', `NODE_IMAGE=${process.env.NODE_IMAGE}`]
    : [];
  await run(
    'bash',
    [
      '-c',
      'set -o pipefail; git archive --format=tar "$1" | docker build -q -t "$2" "${@:3}" -',
      'build',
      commit,
      image,
      ...nodeImage,
    ],
    { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 },
  );
  return (performance.now() - since) / 1000;
}

/** The image a service's container runs, as its tag. */
async function imageOf(service: string): Promise<string> {
  const id = await stack.containerId(service);
  const { stdout } = await run('docker', ['inspect', '--format', '{{.Config.Image}}', id]);
  return stdout.trim();
}

/**
 * One replica moved to `image` as an operator does it: `up -d --no-deps` recreates it (the old
 * container stopped by SIGTERM, drained within its grace period), the new one starts; waits
 * until HAProxy has it back in both backends (HAProxy resolves the replica's name again, should
 * the new container have another address). The seconds it took.
 */
async function replace(service: string, image: string): Promise<number> {
  const since = performance.now();
  const offset = (await balancerLog(stack)).length;
  stack.environment.REALMGATE_IMAGE = image;
  await stack.compose('up', '-d', '--no-deps', service);
  return backInRotation(stack, service, offset, since);
}

/** A query on the platform database, through the stack's PostgreSQL container. */
async function platformQuery(sql: string): Promise<string[]> {
  const out = await stack.compose(
    'exec',
    '-T',
    'postgres',
    ...['psql', '-U', 'realmgate', '-d', 'realmgate', '-tAc', sql],
  );
  return out.split('\n').filter((line) => line !== '');
}

/** The job credential's refresh grant, and what its new access token may do. */
async function jobCredentialWorks() {
  const renewed = await tokenGrant(org, {
    grant_type: 'refresh_token',
    refresh_token: jobRefreshToken,
  });
  expect(renewed.status, JSON.stringify(renewed.json)).toBe(200);
  jobRefreshToken = renewed.json.refresh_token;
  const bearer = `Bearer ${renewed.json.access_token}`;
  return {
    read: (await apiCall(forwardedPath, bearer)).status,
    write: await apiCall(forwardedPath, bearer, { method: 'POST', body: {} }),
    listed: await apiCall<Array<Record<string, unknown>>>(tokensPath, basicAuth(jobOwner)),
  };
}

/** The revoked access token on the forwarded route, four times: both replicas answer. */
async function revokedTokenAnswers(): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    statuses.push((await apiCall(forwardedPath, `Bearer ${revokedAccessToken}`)).status);
  }
  return statuses;
}

/** The organization and its workspace, as an administrator lists them. */
async function organizationAndWorkspace() {
  const admin = await fixture.adminBearer();
  const organizations = await apiCall<Array<{ id: string }>>('/api/platform/organizations', admin);
  const workspaces = await apiCall<Array<{ id: string }>>(
    `/api/platform/organizations/${org}/workspaces`,
    admin,
  );
  return {
    organization: organizations.json.data.some((o) => o.id === org),
    workspaces: workspaces.json.data.map((w) => w.id),
  };
}

/**
 * Whether the release's code reads `realmgate_schema` (from 0.2.0 on); an earlier one leaves the
 * check to knex, which refuses any applied migration it does not know.
 */
async function releaseReadsRecord(): Promise<boolean> {
  return run('git', ['cat-file', '-e', `${previous.commit}:src/db/schema-record.ts`], {
    cwd: ROOT,
  }).then(
    () => true,
    () => false,
  );
}

/**
 * What the rule (schema-history.ts) says of the release's code starting on the database as the
 * upgrade left it: its migrations, and its record for a release that reads it (for one that
 * does not, as if there were none: knex's own check, which schemaVerdict makes without one).
 */
async function rollbackVerdict(): Promise<SchemaVerdict> {
  const applied = await platformQuery('select name from knex_migrations order by id');
  const [row] = await platformQuery(
    `select readable_from || ' ' || migrated_by from ${SCHEMA_RECORD_TABLE}`,
  );
  const [readableFrom, migratedBy] = row!.split(' ');
  const record = (await releaseReadsRecord())
    ? { readableFrom: readableFrom!, migratedBy: migratedBy! }
    : undefined;
  return schemaVerdict(previous.release.version, previous.release.migrations, applied, record);
}

/** `work` under the steady load through HAProxy (production-load.ts `underLoad`). */
const underLoad = <T>(work: () => Promise<T>) => underLoadOf(stack, fixture, 900, work);

describe('a rolling upgrade from the previous release, under load, on the production profile', () => {
  beforeAll(async () => {
    const oldBuild = await buildImageOf(previous.commit, OLD_IMAGE);
    // The checkout's image as `docker compose build` makes it (from Docker's cache when another
    // file of the suite built it first).
    const newStarted = performance.now();
    await run('docker', ['compose', '--profile', 'production', 'build', 'gateway-1'], {
      cwd: ROOT,
      env: { ...process.env, ...secrets, REALMGATE_IMAGE: NEW_IMAGE },
      maxBuffer: 64 * 1024 * 1024,
    });
    const newBuild = (performance.now() - newStarted) / 1000;
    stack = await fixture.startStack({
      environment: { REALMGATE_IMAGE: OLD_IMAGE },
      build: false,
    });
    const rotation = await balancerServes();
    await fixture.makeOrganization('Upgrade', [jobOwner, revokedUser]);
    printFigures(`production profile up on ${OLD_IMAGE}`, {
      [`${OLD_IMAGE} built from ${previous.commit.slice(0, 7)} (git archive)`]: `${oldBuild.toFixed(1)} s`,
      [`${NEW_IMAGE} built from this checkout`]: `${newBuild.toFixed(1)} s`,
      'up (both Keycloak nodes, both gateways, HAProxy)': `${stack.upSeconds.toFixed(1)} s`,
      'then until HAProxy had a replica in rotation on both listeners': `${rotation.toFixed(1)} s`,
    });
  }, 900_000);

  it(`${previous.release.version} serves: a job credential and a revoked access token made with it`, async () => {
    expect(await Promise.all(REPLICAS.map(imageOf))).toEqual([OLD_IMAGE, OLD_IMAGE]);
    jobRefreshToken = await fixture.jobCredential(jobOwner);

    const grant = await tokenGrant(org, {
      grant_type: 'password',
      scope: 'openid',
      ...revokedUser,
    });
    expect(grant.status).toBe(200);
    revokedAccessToken = grant.json.access_token;
    expect((await apiCall(forwardedPath, `Bearer ${revokedAccessToken}`)).status).toBe(200);
    // RFC 7009 on an access token: that token alone ends, its session lives on (the gateway's
    // own revocation list, in Redis).
    const revoked = await fetch(`${PUBLIC_URL}/auth/realms/${org}/protocol/openid-connect/revoke`, {
      method: 'POST',
      body: new URLSearchParams({
        client_id: apiClientIdOf(org),
        token: revokedAccessToken,
        token_type_hint: 'access_token',
      }),
    });
    expect(revoked.status).toBe(200);

    const job0 = await jobCredentialWorks();
    expect([job0.read, job0.write.status, job0.write.json.result]).toEqual([200, 403, '403-30002']);
    expect(await revokedTokenAnswers()).toEqual([401, 401, 401, 401]);
    expect(await organizationAndWorkspace()).toEqual({
      organization: true,
      workspaces: [WORKSPACE],
    });
    expect(await platformQuery('select name from knex_migrations order by id')).toEqual(
      previous.release.migrations,
    );
  });

  it(`replica by replica to this checkout under load: no failed request; ${NEWER.length ? 'the first new replica migrates' : 'nothing to migrate, no replica migrates'}`, async () => {
    const {
      outcome: took,
      result,
      seconds,
      haproxy,
    } = await underLoad(async () => {
      const took: Record<string, number> = {};
      for (const replica of REPLICAS) took[replica] = await replace(replica, NEW_IMAGE);
      return took;
    });
    const migrated = await Promise.all(
      REPLICAS.map(async (replica) => /"msg":"database: migrated"/.test(await stack.logs(replica))),
    );
    printFigures(`rolling upgrade ${OLD_IMAGE} -> ${NEW_IMAGE}`, {
      ...loadFigures(result, haproxy.served),
      'load ran': `${seconds.toFixed(1)} s`,
      ...Object.fromEntries(
        REPLICAS.map((r) => [
          `${r} replaced, until back in HAProxy's rotation`,
          `${took[r]!.toFixed(1)} s`,
        ]),
      ),
      // Each state change is logged twice (HAProxy's log and its alert), once here.
      'HAProxy state changes': [
        ...new Set(haproxy.stateChanges.map((line) => /^Server (\S+ is \w+)/.exec(line)![1])),
      ].join('; '),
      'migrated by gateway-1 / gateway-2': migrated.join(' / '),
    });
    expect(result.bad).toBe(0);
    expect(result.ok).toBeGreaterThan(0);
    expect(haproxy.served['gateway-1']).toBeGreaterThan(0);
    expect(haproxy.served['gateway-2']).toBeGreaterThan(0);
    expect(await Promise.all(REPLICAS.map(imageOf))).toEqual([NEW_IMAGE, NEW_IMAGE]);
    // The first new replica applied the checkout's newer migrations, if any; the second (and the
    // first, when there were none) found nothing to do.
    expect(migrated).toEqual([NEWER.length > 0, false]);
    expect(await platformQuery('select name from knex_migrations order by id')).toEqual([
      ...MIGRATION_NAMES,
    ]);
    expect(await platformQuery(`select count(*) from ${SCHEMA_RECORD_TABLE}`)).toEqual(['1']);
  }, 600_000);

  it('what was made on the previous release holds: organization, workspace, job credential, revocation', async () => {
    const job = await jobCredentialWorks();
    const nightly = job.listed.json.data.find((t) => t.name === 'nightly');
    expect(await organizationAndWorkspace()).toEqual({
      organization: true,
      workspaces: [WORKSPACE],
    });
    expect([job.read, job.write.status, job.write.json.result]).toEqual([200, 403, '403-30002']);
    expect(nightly).toMatchObject({ workspaces: [WORKSPACE], read_only: true });
    expect(await revokedTokenAnswers()).toEqual([401, 401, 401, 401]);
  });

  it(`going back to ${previous.release.version}: where the rule allows, a rollback under load; otherwise its refusal at start`, async () => {
    const verdict = await rollbackVerdict();
    const readsRecord = await releaseReadsRecord();
    if (verdict.kind !== 'refuse') {
      const { result, haproxy } = await underLoad(async () => {
        for (const replica of REPLICAS) await replace(replica, OLD_IMAGE);
      });
      // On a schema the release knows entirely it migrates nothing; on the next release's it
      // says so at start.
      const logs = await Promise.all(REPLICAS.map((replica) => stack.logs(replica)));
      const saidNewer = logs.map((log) => log.includes('migrated by a newer release'));
      printFigures(`rollback ${NEW_IMAGE} -> ${OLD_IMAGE}`, {
        ...loadFigures(result, haproxy.served),
        'the rule, for this release on this schema': verdict.kind,
        '"migrated by a newer release" logged by gateway-1 / gateway-2': saidNewer.join(' / '),
      });
      expect(result.bad).toBe(0);
      expect(result.ok).toBeGreaterThan(0);
      expect(await Promise.all(REPLICAS.map(imageOf))).toEqual([OLD_IMAGE, OLD_IMAGE]);
      expect(saidNewer).toEqual(REPLICAS.map(() => verdict.kind === 'newer'));
      expect(logs.map((log) => /"msg":"database: migrated"/.test(log))).toEqual([false, false]);
      const job = await jobCredentialWorks();
      expect([job.read, job.write.status]).toEqual([200, 403]);
      expect(await revokedTokenAnswers()).toEqual([401, 401, 401, 401]);
      expect(await organizationAndWorkspace()).toEqual({
        organization: true,
        workspaces: [WORKSPACE],
      });
    } else {
      // gateway-1 put back on the old image, as an operator would try: it exits at start, again
      // at each restart, never joins the rotation; gateway-2 serves the load. Then the new image
      // back. A release that reads the record refuses in its own words; an earlier one leaves
      // it to knex, which names the migrations it does not know.
      const refusal = readsRecord
        ? /cannot run on this database/
        : new RegExp(`migration directory is corrupt.*${NEWER.join('.*')}`);
      const { outcome, result, haproxy } = await underLoad(async () => {
        const offset = (await balancerLog(stack)).length;
        stack.environment.REALMGATE_IMAGE = OLD_IMAGE;
        await stack.compose('up', '-d', '--no-deps', 'gateway-1');
        await expect
          .poll(async () => refusal.test(await stack.logs('gateway-1')), {
            timeout: 120_000,
            interval: 1000,
          })
          .toBe(true);
        // `docker compose logs` may start a line with a terminal control sequence.
        const log = stripVTControlCharacters(await stack.logs('gateway-1'));
        const refused = log.split('\n').find((line) => refusal.test(line))!;
        const starts = log.split('\n').filter((line) => line.includes('"msg":"start failed"'));
        const joined = (await balancerLog(stack, offset)).stateChanges.filter((l) =>
          / is UP/.test(l),
        );
        const back = await replace('gateway-1', NEW_IMAGE);
        return { refused, refusals: starts.length, joined, back };
      });
      printFigures(`going back to ${OLD_IMAGE}: refused by the rule`, {
        ...loadFigures(result, haproxy.served),
        "gateway-1's refusal (its log)": outcome.refused.slice(0, 300),
        'starts refused so far (Docker restarts it)': outcome.refusals,
        'gateway-1 on the new image again, back in rotation': `${outcome.back.toFixed(1)} s`,
      });
      expect(JSON.parse(outcome.refused)).toMatchObject({ msg: 'start failed' });
      expect(outcome.joined).toEqual([]);
      expect(result.bad).toBe(0);
      expect(haproxy.served['gateway-2']).toBeGreaterThan(0);
      expect(await revokedTokenAnswers()).toEqual([401, 401, 401, 401]);
    }
    // Nothing was undone either way: the schema is as the upgrade left it.
    expect(await platformQuery('select name from knex_migrations order by id')).toEqual([
      ...MIGRATION_NAMES,
    ]);
  }, 600_000);
});
