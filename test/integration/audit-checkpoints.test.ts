import { createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, exportJWK, type JSONWebKeySet } from 'jose';
import { createBatchAppender } from '../../src/audit/audit-batch.ts';
import { hashOf, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { checkpointSigner } from '../../src/audit/audit-checkpoints.ts';
import { createAuditLogRepo } from '../../src/audit/audit-log.repo.ts';
import { pruneAuditLog } from '../../src/audit/audit-retention.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { createAuditWriter } from '../../src/audit/audit-writer.ts';
import { readKeys, verifyExport } from '../../src/cli/audit-verify.ts';
import { createLogger } from '../../src/http/logger.ts';
import { AUDIT_READER_ROLE } from '../../src/tenancy/identifiers.ts';
import { systemClock } from '../../src/time/clock.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, keycloakAdmin, userIdOf, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { readZip } from '../helpers/zip-reader.ts';

const DAY = 24 * 3600 * 1000;

/** A public key's RFC 7638 thumbprint: its `kid` as the gateway publishes it. */
const thumbprintOf = async (key: KeyObject) => calculateJwkThumbprint(await exportJWK(key));

/**
 * Signed checkpoints against the real stack: two replicas write one organization's log, one
 * with the configured key and one with a key of its own; every checkpoint verifies with the
 * keys the gateway publishes; a record cut off the end is caught; a pruned log's export still
 * verifies; an organization's retention route and its DPoP switch are recorded.
 * Ports 19870/19871 and 19872/19873.
 */
describe('audit log: signed checkpoints, published keys, retention per organization', () => {
  const signingKey = generateKeyPairSync('ed25519')
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  let a: Replica;
  let b: Replica;
  let org: string;
  let reader: TestUser;
  let member: TestUser;
  let admin: TestUser;
  const files: string[] = [];

  beforeAll(async () => {
    const checkpointing = { AUDIT_CHECKPOINT_RECORDS: '5', AUDIT_CHECKPOINT_SECONDS: '1' };
    [a, b] = await Promise.all([
      startReplica(19870, { ...checkpointing, AUDIT_SIGNING_KEY: signingKey }),
      // No key: a key of its own, published through the database.
      startReplica(19872, checkpointing),
    ]);
    org = await createOrganization(['ws1']);
    [reader, member, admin] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser('master'),
    ]);
    const kc = await keycloakAdmin();
    await kc.roles.create({ realm: org, name: AUDIT_READER_ROLE }).catch(() => undefined);
    const role = await kc.roles.findOneByName({ realm: org, name: AUDIT_READER_ROLE });
    await kc.users.addRealmRoleMappings({
      realm: org,
      id: await userIdOf(reader),
      roles: [{ id: role!.id!, name: role!.name! }],
    });
  });

  afterAll(async () => {
    await Promise.all([a?.gateway.close(), b?.gateway.close()]);
    await Promise.all(files.map((file) => rm(file, { force: true })));
    await closeTestDb();
  });

  const db = () => testDb();

  /** A writer of the test's own records, written when it closes. */
  const quietWriter = () =>
    createAuditWriter({
      db: db(),
      logger: createLogger('silent'),
      metrics: { auditRecords: () => undefined },
      spoolMax: 100,
      batchMax: 100,
      intervalMs: 60_000,
    });

  async function exportFile(log: string, as: TestUser): Promise<string> {
    const base = log === org ? `/api/${org}/platform` : `/api/platform/organizations/${log}`;
    const res = await fetch(`${a.url}${base}/audit-log/export`, {
      headers: { authorization: basicAuth(as) },
    });
    expect(res.status).toBe(200);
    const file = path.join(os.tmpdir(), `realmgate-audit-${randomBytes(4).toString('hex')}.jsonl`);
    await writeFile(file, await res.text());
    files.push(file);
    return file;
  }

  /** The set B publishes, once it lists every key a checkpoint of `log` was signed with. */
  async function publishedKeysCovering(log: string): Promise<JSONWebKeySet> {
    const url = `${b.url}/.well-known/audit-keys`;
    let keys: JSONWebKeySet = { keys: [] };
    await expect
      .poll(async () => {
        keys = await readKeys(url);
        const kids = await db()('audit_checkpoints')
          .where({ org: log })
          .distinct()
          .pluck<string[]>('kid');
        return kids.every((kid) => keys.keys.some((key) => key.kid === kid));
      }, EVENTUALLY)
      .toBe(true);
    return keys;
  }

  /** Waits until a checkpoint signs the head of `log` (no record written since). */
  async function signedToHead(log: string): Promise<number> {
    let head = 0;
    await expect
      .poll(async () => {
        const h = await db()('audit_log_heads')
          .where({ org: log })
          .first<{ seq: unknown } | undefined>('seq');
        const [c] = await db()('audit_checkpoints')
          .where({ org: log })
          .max<{ seq: unknown }[]>({ seq: 'seq' });
        head = Number(h?.seq ?? 0);
        return head > 0 && Number(c?.seq) === head;
      }, EVENTUALLY)
      .toBe(true);
    return head;
  }

  it('publishes the signing keys without credentials, as a JWKS', async () => {
    const res = await fetch(`${a.url}/.well-known/audit-keys`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/jwk-set\+json/);
    const { keys } = (await res.json()) as JSONWebKeySet;
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.every((k) => k.kty === 'OKP' && k.crv === 'Ed25519' && k.alg === 'EdDSA')).toBe(
      true,
    );
    // Public keys only.
    expect(keys.some((k) => 'd' in k)).toBe(false);
  });

  it('checkpoints of two replicas writing one log verify with the keys the gateway publishes', async () => {
    // Records of both replicas (/api calls through each), in two rounds, each signed.
    let head = 0;
    for (let round = 0; round < 2; round++) {
      const calls = Array.from({ length: 6 }, (_, i) =>
        callApi(`/api/${org}/platform/audit-log?limit=1`, basicAuth(reader), {
          base: (i % 2 ? a : b).url,
        }),
      );
      expect((await Promise.all(calls)).every((res) => res.status === 200)).toBe(true);
      const before = head;
      await expect.poll(() => signedToHead(org), EVENTUALLY).toBeGreaterThan(before);
      head = await signedToHead(org);
    }
    const keys = await publishedKeysCovering(org);
    const file = await exportFile(org, reader);
    const verified = await verifyExport(file, keys);
    expect(verified).toMatchObject({ org, firstSeq: 1, anchored: true, signedThrough: head });
    expect(verified.lastSeq).toBeGreaterThanOrEqual(head);
    expect(verified.checkpoints).toBeGreaterThan(1);
    // Pinned to keys that are not the gateway's, the export does not verify.
    const stranger = await exportJWK(generateKeyPairSync('ed25519').publicKey);
    await expect(verifyExport(file, { keys: [{ ...stranger, kid: 'stranger' }] })).rejects.toThrow(
      /^checkpoint \d+ \(line \d+\) does not fit: it is signed with key .*, which is not among the keys/,
    );
  });

  it("a download job's zip carries the keys and checkpoints: a file edited and rechained does not verify", async () => {
    const downloads = `/api/${org}/platform/auditlog/download`;
    // Records of the range, written before the job fixes what it covers.
    const listed = await callApi(`/api/${org}/platform/workspaces`, basicAuth(member), {
      base: a.url,
    });
    expect(listed.status).toBe(200);
    await expect
      .poll(async () => {
        const [written] = await db()('audit_log')
          .where({ org })
          .count<{ count: string }[]>({ count: '*' });
        return Number(written?.count);
      }, EVENTUALLY)
      .toBeGreaterThan(0);
    const ts = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
    const started = await callApi(downloads, basicAuth(reader), {
      base: a.url,
      method: 'POST',
      body: { ts_from: ts(Date.now() - 3600_000), ts_to: ts(Date.now() + 60_000) },
    });
    expect(started.status).toBe(200);
    const id = (started.body.data as { download_id: string }).download_id;
    let lastSeq = 0;
    await expect
      .poll(async () => {
        const job = await db()('audit_download_jobs')
          .where({ id })
          .first<{ status: string; last_seq: unknown }>('status', 'last_seq');
        lastSeq = Number(job.last_seq);
        return job.status;
      }, EVENTUALLY)
      .toBe('Completion');
    // Signed up to the last record the job covers.
    await expect
      .poll(async () => {
        const [c] = await db()('audit_checkpoints')
          .where({ org })
          .where('seq', '>=', lastSeq)
          .count<{ count: string }[]>({ count: '*' });
        return Number(c?.count);
      }, EVENTUALLY)
      .toBeGreaterThan(0);
    const res = await fetch(`${b.url}${downloads}/${id}`, {
      method: 'POST',
      headers: { authorization: basicAuth(reader) },
    });
    expect(res.status).toBe(200);
    const [entry] = readZip(Buffer.from(await res.arrayBuffer()));
    const text = entry!.content.toString('utf8');
    const keys = await publishedKeysCovering(org);
    const saved = async (content: string) => {
      const file = path.join(os.tmpdir(), `realmgate-audit-${randomBytes(4).toString('hex')}.log`);
      await writeFile(file, content);
      files.push(file);
      return file;
    };
    const verified = await verifyExport(await saved(text), keys);
    expect(verified).toMatchObject({ org, firstSeq: 1, anchored: true });
    expect(verified.checkpoints).toBeGreaterThan(0);
    expect(verified.signedThrough).toBeGreaterThan(0);

    // Whoever edits a record and rechains every record after it is caught by a checkpoint.
    let prevHash: string | undefined;
    const forged = text
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const value = JSON.parse(line) as AuditRecord & { type?: string };
        if (value.type !== undefined) return line;
        const record = { ...value, prevHash: prevHash ?? value.prevHash };
        if (record.seq === 1) record.actorName = 'someone-else';
        prevHash = hashOf(record);
        return JSON.stringify({ ...record, hash: prevHash });
      })
      .join('\n');
    await expect(verifyExport(await saved(forged), keys)).rejects.toThrow(
      /^checkpoint \d+ \(line \d+\) does not fit/,
    );
  });

  it('with AUDIT_SIGNING_KEY set, a key added to the database is not published: checkpoints it signs do not verify', async () => {
    const configured = await thumbprintOf(createPublicKey(signingKey));
    const log = `forged-${randomBytes(4).toString('hex')}`;
    const writer = quietWriter();
    for (let i = 0; i < 4; i++) writer.record(apiEvent(log, Date.now() - 1000 + i));
    await writer.close(5000);
    const head = await signedToHead(log);

    // Someone who can write the database adds a key of their own, edits record 2, hashes every
    // record after it again, and replaces the log's checkpoints with one signed by their key.
    const forger = generateKeyPairSync('ed25519').privateKey;
    const forgerJwk = await exportJWK(createPublicKey(forger));
    const kid = await thumbprintOf(createPublicKey(forger));
    const published = { ...forgerJwk, kid, alg: 'EdDSA', use: 'sig' };
    await db()('audit_signing_keys').insert({
      kid,
      jwk: JSON.stringify(published),
      created_at: new Date(0),
    });
    await db().transaction(async (trx) => {
      // The head row locked, as a replica's checkpoint locks it: none signs meanwhile.
      await trx('audit_log_heads').where({ org: log }).forUpdate().first();
      const rows = (await trx('audit_log').where({ org: log }).orderBy('seq')) as AuditRow[];
      let prevHash: string | undefined;
      let last: AuditRecord | undefined;
      for (const row of rows) {
        const stored = recordOf(row);
        const edited = {
          ...stored,
          prevHash: prevHash ?? stored.prevHash,
          actorName: stored.seq === 2 ? 'someone-else' : stored.actorName,
        };
        prevHash = hashOf(edited);
        last = { ...edited, hash: prevHash };
        await trx('audit_log')
          .where({ org: log, seq: stored.seq })
          .update({ actor_name: edited.actorName, prev_hash: edited.prevHash, hash: prevHash });
      }
      await trx('audit_log_heads').where({ org: log }).update({ hash: last!.hash });
      const forged = await checkpointSigner(forger, published).sign({
        org: log,
        seq: head,
        hash: last!.hash,
        recordAt: last!.at,
        at: new Date().toISOString(),
      });
      await trx('audit_checkpoints').where({ org: log }).del();
      await trx('audit_checkpoints').insert({
        org: log,
        seq: head,
        hash: forged.hash,
        record_at: new Date(forged.recordAt),
        at: new Date(forged.at),
        kid,
        jws: forged.jws,
      });
    });

    // The replica with the key publishes that key alone, in its exports and its answer.
    const file = await exportFile(log, admin);
    const refused = new RegExp(
      `^checkpoint ${head} \\(line \\d+\\) does not fit: it is signed with key ${kid}, which is not among the keys`,
    );
    await expect(verifyExport(file)).rejects.toThrow(refused);
    const keys = await readKeys(`${a.url}/.well-known/audit-keys`);
    expect(keys.keys.map((key) => key.kid)).toEqual([configured]);
    await expect(verifyExport(file, keys)).rejects.toThrow(refused);
  });

  it('a record removed at the end of the log is caught by the checkpoint that signed it', async () => {
    const head = await signedToHead(org);
    await db()('audit_log').where({ org, seq: head }).del();
    const keys = await publishedKeysCovering(org);
    const file = await exportFile(org, reader);
    await expect(verifyExport(file, keys)).rejects.toThrow(
      new RegExp(
        `^checkpoint ${head} \\(line \\d+\\) does not fit: it names record ${head}, which the export lacks`,
      ),
    );
  });

  it('an export of a pruned log verifies from the checkpoint that anchors it', async () => {
    const pruned = await createOrganization([]);
    const old = Date.now() - 400 * DAY;
    const writer = quietWriter();
    for (let i = 0; i < 20; i++) {
      writer.record(apiEvent(pruned, old + i, { actorName: `user-${i}` }));
    }
    await writer.close(5000);
    // Signed by a replica while the old records are the head: that checkpoint anchors what
    // remains once they are gone.
    const anchor = await signedToHead(pruned);
    // A newer record after it, through a replica, signed in its turn.
    await callApi(`/api/platform/organizations/${pruned}/audit-log?limit=1`, basicAuth(admin), {
      base: a.url,
    });
    await expect.poll(() => signedToHead(pruned), EVENTUALLY).toBeGreaterThan(anchor);
    // Pruned by this call, or by another file's prune of the shared database (audit-tenancy, a
    // replica's retention run) in the meantime: what is left is what counts.
    await pruneAuditLog(db(), { defaultDays: 365, minDays: 1, maxDays: 3650 }, systemClock);
    const [first] = await db()('audit_log').where({ org: pruned }).min({ seq: 'seq' });
    expect(Number(first?.seq)).toBe(anchor + 1);
    const keys = await publishedKeysCovering(pruned);
    await expect(verifyExport(await exportFile(pruned, admin), keys)).resolves.toMatchObject({
      org: pruned,
      firstSeq: anchor + 1,
      anchored: true,
    });
  });

  it('an export that retention cuts into fails, rather than leave a gap that reads as tampering', async () => {
    const log = `cut-${randomBytes(4).toString('hex')}`;
    const old = Date.now() - 400 * DAY;
    await createBatchAppender(db()).append(
      Array.from({ length: 1500 }, (_, i) => apiEvent(log, old + i)),
      undefined,
      () => undefined,
    );
    const repo = createAuditLogRepo(db());
    const span = await repo.span(log, {});
    expect(span).toEqual({ first: 1, last: 1500 });
    const records = repo.records(log, {}, span);
    // The export's first thousand records read (one chunk) ...
    for (let seq = 1; seq <= 1000; seq++) {
      expect((await records.next()).value).toMatchObject({ seq });
    }
    // ... then retention removes the log's oldest records, up to a checkpoint, under it.
    const signed = await db()('audit_log')
      .where({ org: log, seq: 1200 })
      .first<{ hash: string; at: Date }>('hash', 'at');
    await db()('audit_checkpoints').insert({
      org: log,
      seq: 1200,
      hash: signed.hash,
      record_at: signed.at,
      at: new Date(),
      kid: 'test',
      jws: 'test',
    });
    await pruneAuditLog(db(), { defaultDays: 365, minDays: 1, maxDays: 3650 }, systemClock);
    expect(await db()('audit_log').where({ org: log, seq: 1001 }).first()).toBeUndefined();
    const rest = async () => {
      for (let next = await records.next(); !next.done; next = await records.next());
    };
    await expect(rest()).rejects.toMatchObject({ result: '409-40002' });
  });

  it('prunes only records past the limit: one taken late with an old time waits for those before it', async () => {
    const log = `late-${randomBytes(4).toString('hex')}`;
    const now = Date.now();
    const old = now - 400 * DAY;
    const writer = quietWriter();
    // 1-3 past the limit, 4-5 within it, then 6 with an old time: what a Keycloak event of a
    // realm that kept events for long is when its first pull takes it.
    const times = [old, old + 1, old + 2, now - 2, now - 1, old + 3];
    times.forEach((atMs, i) => writer.record(apiEvent(log, atMs, { actorName: `user-${i + 1}` })));
    await writer.close(5000);
    const third = await db()('audit_log')
      .where({ org: log, seq: 3 })
      .first<{ hash: string; at: Date }>('hash', 'at');
    await db()('audit_checkpoints').insert({
      org: log,
      seq: 3,
      hash: third.hash,
      record_at: third.at,
      at: new Date(),
      kid: 'test',
      jws: 'test',
    });
    // A replica signs the head, 6: the newest checkpoint at or before the newest record past
    // the limit, which is no reason to remove 4 and 5.
    expect(await signedToHead(log)).toBe(6);
    await pruneAuditLog(db(), { defaultDays: 365, minDays: 1, maxDays: 3650 }, systemClock);
    expect(await db()('audit_log').where({ org: log }).orderBy('seq').pluck('seq')).toEqual([
      '4',
      '5',
      '6',
    ]);
    expect(await db()('audit_checkpoints').where({ org: log }).orderBy('seq').pluck('seq')).toEqual(
      ['3', '6'],
    );
  });

  it('prunes a long expired prefix in bounded statements, each step ending at a checkpoint', async () => {
    const log = `long-${randomBytes(4).toString('hex')}`;
    const old = Date.now() - 400 * DAY;
    // 1500 records past the limit and one within it, in one batch: no replica signs 1500.
    await createBatchAppender(db()).append(
      [
        ...Array.from({ length: 1500 }, (_, i) => apiEvent(log, old + i)),
        apiEvent(log, Date.now()),
      ],
      undefined,
      () => undefined,
    );
    for (const seq of [250, 1300]) {
      const signed = await db()('audit_log')
        .where({ org: log, seq })
        .first<{ hash: string; at: Date }>('hash', 'at');
      await db()('audit_checkpoints').insert({
        org: log,
        seq,
        hash: signed.hash,
        record_at: signed.at,
        at: new Date(),
        kid: 'test',
        jws: 'test',
      });
    }
    // What each statement removing this log's records removed.
    const removedBy: number[] = [];
    const seen = (response: unknown, query: { sql: string; bindings?: unknown[] }) => {
      if (!/^delete from "audit_log"/.test(query.sql) || !query.bindings?.includes(log)) return;
      removedBy.push(Array.isArray(response) ? response.length : Number(response));
    };
    db().on('query-response', seen);
    try {
      await pruneAuditLog(db(), { defaultDays: 365, minDays: 1, maxDays: 3650 }, systemClock, {
        chunkRecords: 100,
      });
    } finally {
      db().off('query-response', seen);
    }
    expect(Math.max(...removedBy)).toBeLessThanOrEqual(100);
    expect(removedBy.reduce((a, b) => a + b, 0)).toBe(1300);
    const [first] = await db()('audit_log').where({ org: log }).min({ seq: 'seq' });
    expect(Number(first?.seq)).toBe(1301);
    expect(await db()('audit_log').where({ org: log }).count({ n: '*' })).toEqual([{ n: '201' }]);
    const checkpoints = await db()('audit_checkpoints').where({ org: log }).pluck<string[]>('seq');
    expect(checkpoints.map(Number).filter((seq) => seq <= 1500)).toEqual([1300]);
  });

  it("lets an organization's audit administrator choose its retention within the bounds, recorded", async () => {
    const own = `/api/${org}/platform/audit-log/retention`;
    const put = (as: TestUser, body: unknown, at = own) =>
      callApi(at, basicAuth(as), { method: 'PUT', body, base: a.url });
    expect((await callApi(own, basicAuth(reader), { base: a.url })).body).toMatchObject({
      result: '000-00000',
      data: { days: 365, chosen: false, minDays: 90, maxDays: 3650 },
    });
    expect(await put(reader, { days: 400 })).toMatchObject({
      status: 200,
      body: { data: { days: 400, chosen: true } },
    });
    // Without the role: refused, and the attempt recorded.
    expect((await put(member, { days: 100 })).status).toBe(403);
    // Outside the bounds, or not a number of days: 400 in the envelope.
    for (const body of [
      { days: 30 },
      { days: 99999 },
      { days: '400' },
      { days: 1.5 },
      {},
      { days: 400, x: 1 },
      [400],
      null,
    ]) {
      const res = await put(reader, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ result: '400-00002', data: null });
    }
    const raw = await fetch(`${a.url}${own}`, {
      method: 'PUT',
      headers: { authorization: basicAuth(reader), 'content-type': 'application/json' },
      body: '{"days":',
    });
    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { result: string }).result).toMatch(/^400-/);
    // A platform administrator sets it through the organization's administered path.
    const administered = `/api/platform/organizations/${org}/audit-log/retention`;
    expect(await put(admin, { days: 500 }, administered)).toMatchObject({
      status: 200,
      body: { data: { days: 500, chosen: true } },
    });
    await expect
      .poll(async () => {
        const rows = await db()('audit_log')
          .where({ org, action: 'audit_log.retention.change' })
          .select('outcome', 'actor_name', 'details');
        return rows.map((r: { outcome: string; actor_name: string; details: unknown }) => [
          r.outcome,
          r.actor_name,
          (r.details as { days?: string }).days,
        ]);
      }, EVENTUALLY)
      .toEqual(
        expect.arrayContaining([
          ['success', reader.username, '400'],
          ['failure', member.username, '100'],
          ['success', admin.username, '500'],
        ]),
      );
  });

  it("records an organization's DPoP switch as dpop.required.changed, from and to", async () => {
    const lifetimes = `/api/platform/organizations/${org}/token-lifetimes`;
    const patch = (required: boolean) =>
      callApi(lifetimes, basicAuth(admin), {
        method: 'PATCH',
        body: { dpop_bound_access_tokens: required },
        base: b.url,
      });
    expect((await patch(true)).status).toBe(200);
    expect((await patch(false)).status).toBe(200);
    await expect
      .poll(async () => {
        const rows = await db()('audit_log')
          .where({ org, action: 'dpop.required.changed' })
          .orderBy('seq')
          .select('actor_name', 'details');
        return rows.map((r: { actor_name: string; details: unknown }) => [r.actor_name, r.details]);
      }, EVENTUALLY)
      .toEqual([
        [admin.username, { realm: org, from: 'false', to: 'true' }],
        [admin.username, { realm: org, from: 'true', to: 'false' }],
      ]);
  });
});
