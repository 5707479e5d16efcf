import { createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCheckpointer, type Checkpointer } from '../../../src/audit/audit-checkpointer.ts';
import { signedJsonLines, storedCheckpoints } from '../../../src/audit/audit-export-signed.ts';
import { createAuditLogRepo } from '../../../src/audit/audit-log.repo.ts';
import { createRetentionChoices, pruneAuditLog } from '../../../src/audit/audit-retention.ts';
import { openCheckpointSigner, publishedKeys } from '../../../src/audit/audit-signing-key.ts';
import { createExportVerifier } from '../../../src/audit/export-verifier.ts';
import { apiEvent, quietWriter } from '../../helpers/audit-records.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';

const DAY = 24 * 3600 * 1000;
const START = Date.UTC(2026, 10, 1);

describe('audit checkpoints and retention (embedded database)', () => {
  let db: Knex;
  let close: () => Promise<void>;
  let now = START;
  const clock = { now: () => now };

  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('audit-checkpoints'));
  }, 120_000);

  afterAll(() => close());

  async function write(org: string, times: number[]): Promise<void> {
    const writer = quietWriter(db);
    for (const at of times) writer.record(apiEvent(org, at));
    await writer.close(5000);
  }

  function checkpointer(signingKey?: string): Checkpointer {
    let opened: ReturnType<typeof openCheckpointSigner> | undefined;
    return createCheckpointer({
      db,
      signer: () => (opened ??= openCheckpointSigner({ db, clock, signingKey })),
      clock,
      period: { records: 5, ms: 60_000 },
    });
  }

  async function seqs(table: string, org: string): Promise<number[]> {
    return (await db(table).where({ org }).orderBy('seq').pluck('seq')).map(Number);
  }

  const newKeySet = () =>
    publishedKeys({
      db,
      clock: { now: () => Date.now() },
      signingKey: undefined,
      previousKeys: undefined,
    });

  async function verifiedExport(org: string, keys = newKeySet()) {
    const signatures = {
      keys,
      ...storedCheckpoints(db),
      signer: () => openCheckpointSigner({ db, clock, signingKey: undefined }),
      now: () => clock.now(),
    };
    const repo = createAuditLogRepo(db);
    const span = await repo.span(org, {});
    const records = repo.records(org, {}, span);
    const verifier = createExportVerifier();
    let line = 0;
    for await (const text of signedJsonLines(org, records, signatures, span.last)) {
      await verifier.line(JSON.parse(text), ++line);
    }
    return verifier.finish();
  }

  it('signs a log after N records or T seconds, once per period whichever replica looks', async () => {
    now = START;
    await write('periodic', [now, now + 1, now + 2]);
    const [a, b] = [checkpointer(), checkpointer()];
    // Three records, none a minute old: not due.
    expect(await a.checkpointDue()).toBe(0);
    now += 60_000;
    // Two replicas at once: one signs, the other finds it signed.
    const made = await Promise.all([a.checkpointDue(), b.checkpointDue()]);
    expect(made.sort()).toEqual([0, 1]);
    expect(await seqs('audit_checkpoints', 'periodic')).toEqual([3]);
    // Five more records: due at once, by count.
    await write('periodic', [now, now, now, now, now]);
    expect(await a.checkpointDue()).toBe(1);
    expect(await b.checkpointDue()).toBe(0);
    await expect(verifiedExport('periodic')).resolves.toMatchObject({
      records: 8,
      checkpoints: 2,
      signedThrough: 8,
      anchored: true,
    });
  });

  it('exports a checkpoint that a replica started seconds ago signed, with its key', async () => {
    now = START;
    await write('newkey', [now, now, now, now, now]);
    // This replica's published key set, answered from memory for a few seconds.
    const keys = newKeySet();
    expect(await checkpointer().checkpointDue()).toBe(1);
    await expect(verifiedExport('newkey', keys)).resolves.toMatchObject({ checkpoints: 1 });
    // Another replica starts (a key of its own) and signs the next records at once.
    await write('newkey', [now, now, now, now, now]);
    expect(await checkpointer().checkpointDue()).toBe(1);
    await expect(verifiedExport('newkey', keys)).resolves.toMatchObject({
      records: 10,
      checkpoints: 2,
    });
  });

  it('with AUDIT_SIGNING_KEY, publishes its key and the previous ones, never a key the database holds', async () => {
    const pem = (key: KeyObject, type: 'pkcs8' | 'spki') =>
      key.export({ type, format: 'pem' }).toString();
    const signingKey = pem(generateKeyPairSync('ed25519').privateKey, 'pkcs8');
    const previous = generateKeyPairSync('ed25519').publicKey;
    const kidOf = async (key: KeyObject) => calculateJwkThumbprint(await exportJWK(key));
    // A key of this process's (written to the database as it opens) and one a party who can
    // write the database added.
    await openCheckpointSigner({ db, clock, signingKey: undefined });
    const added = generateKeyPairSync('ed25519').publicKey;
    const addedKid = await kidOf(added);
    const addedJwk = { ...(await exportJWK(added)), kid: addedKid, alg: 'EdDSA', use: 'sig' };
    await db('audit_signing_keys').insert({
      kid: addedKid,
      jwk: JSON.stringify(addedJwk),
      created_at: new Date(now),
    });
    const keys = publishedKeys({
      db,
      clock,
      signingKey,
      previousKeys: pem(previous, 'spki'),
    });
    const kids = (await keys({ current: true })).keys.map((key) => key.kid);
    expect(kids).toEqual([await kidOf(previous), await kidOf(createPublicKey(signingKey))]);
    // Without it, every key the database lists is published (a key per process).
    const unset = publishedKeys({ db, clock, signingKey: undefined, previousKeys: undefined });
    expect((await unset({ current: true })).keys.map((key) => key.kid)).toContain(addedKid);
  });

  it("prunes each log by its own days, within the platform's bounds, up to a checkpoint; the rest verifies", async () => {
    now = START;
    const signer = checkpointer();
    // Records 1-4 at day 0, checkpoint at 4; 5-6 at day 20, checkpoint at 6; 7 today.
    await write('kept', [now, now, now, now]);
    await signer.checkpoint('kept');
    await write('kept', [now + 20 * DAY, now + 20 * DAY]);
    await signer.checkpoint('kept');
    await write('kept', [now + 40 * DAY]);
    // The same in a log that chose no days of its own.
    await write('default', [now, now, now]);
    await signer.checkpoint('default');
    now += 40 * DAY;
    await createRetentionChoices(db).set('kept', 30);
    const bounds = { defaultDays: 365, minDays: 1, maxDays: 3650 };
    expect(await pruneAuditLog(db, bounds, clock)).toBe(4);
    expect(await seqs('audit_log', 'kept')).toEqual([5, 6, 7]);
    expect(await seqs('audit_log', 'default')).toEqual([1, 2, 3]);
    // The checkpoint of the last record removed stays: it anchors the first record left.
    expect(await seqs('audit_checkpoints', 'kept')).toEqual([4, 6]);
    await expect(verifiedExport('kept')).resolves.toMatchObject({
      firstSeq: 5,
      lastSeq: 7,
      anchored: true,
      checkpoints: 2,
      signedThrough: 6,
    });
    // Bounds narrowed since the choice: the nearest bound holds (35 days keeps records 5 and 6).
    now += 10 * DAY;
    expect(await pruneAuditLog(db, { ...bounds, minDays: 35 }, clock)).toBe(0);
    // Without a checkpoint after them, expired records wait for one.
    now += 30 * DAY;
    expect(await pruneAuditLog(db, bounds, clock)).toBe(2);
    expect(await seqs('audit_log', 'kept')).toEqual([7]);
  });
});
