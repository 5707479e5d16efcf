import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { calculateJwkThumbprint, exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../../src/audit/audit-chain.ts';
import {
  checkpointSigner,
  type CheckpointSigner,
  type ExportEndClaims,
} from '../../../src/audit/audit-checkpoints.ts';
import { signedEnd } from '../../../src/audit/export-end.ts';
import { chainedLog } from '../../helpers/audit-records.ts';
import { givesANameTwice } from '../../../src/cli/audit-verify.ts';
import { runCli } from '../../../src/cli/main.ts';
import { capturingIo } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

describe('realmgate audit list --json against a stand-in API', () => {
  // Five records, newest first, two to a page; one's name carries a C1 control (U+009B, CSI).
  const records = chainedLog(5).reverse();
  records[1] = { ...records[1]!, actorName: 'a\u009b2Jb' };
  let server: Server;
  let baseUrl: string;
  /** What stdout held as each page was asked for. */
  let printedBefore: string[];
  let output: { stdout: string; stderr: string };

  beforeAll(async () => {
    server = createServer((req, res) => {
      printedBefore.push(output.stdout);
      const after = new URL(req.url!, 'http://stand-in').searchParams.get('after');
      const start = after === null ? 0 : records.findIndex((r) => r.seq < Number(after));
      const page = records.slice(start, start + 2);
      const next = start + 2 < records.length ? page.at(-1)!.seq : null;
      const data = { records: page, total: records.length, next };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data, message: 'SUCCESS', result: '000-00000', ts: '' }));
    });
    baseUrl = await listenLocally(server);
  });
  afterAll(async () => {
    await closeServers(server);
  });

  it('prints each page as it comes, not the whole listing at its end', async () => {
    printedBefore = [];
    const captured = capturingIo();
    output = captured.output;
    const env = { REALMGATE_URL: baseUrl, REALMGATE_USERNAME: 'a', REALMGATE_PASSWORD: 'b' };
    const status = await runCli(['audit', 'list', 'acme', '--all', '--json'], env, captured.io);
    expect(status).toBe(0);
    // The first page was printed before the last one was asked for.
    expect(printedBefore).toHaveLength(3);
    expect(printedBefore[2]).toContain(`"hash": "${records[0]!.hash}"`);
    expect(JSON.parse(output.stdout)).toEqual({ total: 5, records, next: null });
    // Escaped as any printed JSON: a server's text cannot drive the terminal.
    expect(output.stdout).toContain('a\\u009b2Jb');
    expect(output.stdout).not.toContain('\u009b');
  });
});

describe('realmgate audit verify', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'realmgate-audit-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function verify(
    records: unknown[],
  ): Promise<{ status: number; stdout: string; stderr: string }> {
    return verifyText(records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  }

  async function verifyText(
    text: string,
  ): Promise<{ status: number; stdout: string; stderr: string }> {
    const file = path.join(dir, `export-${Math.random()}.jsonl`);
    await writeFile(file, text);
    const { io, output } = capturingIo();
    const status = await runCli(['audit', 'verify', file], {}, io);
    return { status, ...output };
  }

  /** The end line an export of `records` closes with, signed by `signer` when given. */
  async function endOf(records: AuditRecord[], signer?: CheckpointSigner) {
    const claims: ExportEndClaims = {
      org: 'acme',
      firstSeq: records[0]?.seq ?? null,
      lastSeq: records.at(-1)?.seq ?? null,
      records: records.length,
      hash: records.at(-1)?.hash ?? null,
      at: '2026-11-02T00:00:00.000Z',
    };
    return { type: 'end', ...(signer ? await signedEnd(signer, claims) : claims) };
  }

  it('says what a whole export holds, and its last hash', async () => {
    const records = chainedLog(5);
    const { status, stdout } = await verify([...records, await endOf(records)]);
    expect(status).toBe(0);
    expect(JSON.parse(stdout)).toEqual({
      records: 5,
      org: 'acme',
      firstSeq: 1,
      firstPrevHash: records[0]!.prevHash,
      lastSeq: 5,
      lastHash: records[4]!.hash,
      // An export of records alone: chained from the log's first, no checkpoint to check.
      checkpoints: 0,
      anchored: true,
      signedThrough: null,
      keys: null,
    });
  });

  it('names the first record that does not fit: edited, or after one removed (exit 4)', async () => {
    const edited = chainedLog(5);
    edited[2] = { ...edited[2]!, actorName: 'mallory' };
    expect(await verify(edited)).toMatchObject({
      status: 4,
      stderr: 'realmgate: record 3 (line 3) does not fit: its hash does not match its content.\n',
    });
    const removed = chainedLog(5);
    removed.splice(1, 1);
    const result = await verify(removed);
    expect(result.status).toBe(4);
    expect(result.stderr).toMatch(
      /^realmgate: record 3 \(line 2\) does not fit: it is number 3, after 1/,
    );
  });

  it('refuses a line that gives a field twice, whose verified value another reader would not see', async () => {
    const log = chainedLog(3);
    const lines = [...log, await endOf(log)].map((r) => JSON.stringify(r));
    expect((await verifyText(lines.join('\n') + '\n')).status).toBe(0);
    // The verified value last: JSON.parse keeps it, a reader taking the first sees "mallory".
    lines[1] = lines[1]!.replace('{', `{"actorName":"mallory",`);
    expect((JSON.parse(lines[1]) as { actorName: string }).actorName).toBe(log[1]!.actorName);
    const refused = await verifyText(lines.join('\n') + '\n');
    expect(refused.status).toBe(4);
    expect(refused.stderr).toMatch(/^realmgate: line 2 gives a field twice/);
    // In a nested object too; a name repeated in separate objects, or as a value, is no repeat.
    expect(givesANameTwice('{"d":{"a":"1","b":[{"a":1},{"a":2}],"a":"2"}}')).toBe(true);
    expect(givesANameTwice('{"a":"a","b":{"a":"\\"a\\":"},"c":[{"a":1},{"a":2}]}')).toBe(false);
    expect(givesANameTwice('{"a\\u0062":1,"ab":2}')).toBe(true);
  });

  it('says which records no signature covers: a checkpoint at the end removed, or records after the last one', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
    const log = chainedLog(8);
    const checkpointOf = async (seq: number) => ({
      type: 'checkpoint',
      ...(await signer.sign({
        org: 'acme',
        seq,
        hash: log[seq - 1]!.hash,
        recordAt: log[seq - 1]!.at,
        at: '2026-11-02T00:00:00.000Z',
      })),
    });
    const keys = { type: 'keys', keys: [signer.publicJwk] };
    const [five, eight] = [await checkpointOf(5), await checkpointOf(8)];
    const end = await endOf(log, signer);
    const whole = [keys, ...log.slice(0, 5), five, ...log.slice(5), eight, end];
    const unpinned =
      'realmgate: the signatures were checked with the keys this export brings, which anyone ' +
      "rewriting it could replace: to prove the gateway signed it, pin the gateway's keys " +
      '(--keys with its /.well-known/audit-keys, fetched yourself).\n';
    expect(await verify(whole)).toMatchObject({ status: 0, stderr: unpinned });

    // The checkpoint at the end removed: what it signed is chained, no longer signed.
    const unsigned = await verify([...whole.slice(0, -2), end]);
    expect(unsigned.status).toBe(0);
    expect(JSON.parse(unsigned.stdout)).toMatchObject({ lastSeq: 8, signedThrough: 5 });
    expect(unsigned.stderr).toBe(
      'realmgate: records 6 to 8 (3) are not covered by a signature: the chain holds, but ' +
        'whoever could write the log or this file could have changed records there, added some ' +
        'or removed some (an export ends after its last checkpoint, or a checkpoint was taken ' +
        'out). A later checkpoint covers them: check that the export of what follows starts ' +
        `with record 9 and prevHash ${log[7]!.hash}, and verify it too.\n` +
        unpinned,
    );
    // Records after the last checkpoint removed, with the checkpoint that named them, before
    // the export (its end line says so).
    expect(
      (await verify([...whole.slice(0, 8), await endOf(log.slice(0, 6), signer)])).stderr,
    ).toMatch(/^realmgate: record 6 \(1\) is not covered by a signature: /);
    // No checkpoint at all.
    expect((await verify([keys, ...log, end])).stderr).toMatch(
      /^realmgate: no record of this export is covered by a signature: records 1 to 8 \(8\)/,
    );
  });

  it('says when the first record is not anchored: records before it could have been removed', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
    const log = chainedLog(8);
    const checkpointOf = async (seq: number) => ({
      type: 'checkpoint',
      ...(await signer.sign({
        org: 'acme',
        seq,
        hash: log[seq - 1]!.hash,
        recordAt: log[seq - 1]!.at,
        at: '2026-11-02T00:00:00.000Z',
      })),
    });
    const keys = { type: 'keys', keys: [signer.publicJwk] };
    const [three, eight] = [await checkpointOf(3), await checkpointOf(8)];
    const unpinned = /^realmgate: the signatures were checked with the keys this export brings/;

    // From record 4 on, the checkpoint of record 3 first: its start is vouched for.
    const fromFour = log.slice(3);
    const anchored = await verify([keys, three, ...fromFour, eight, await endOf(fromFour, signer)]);
    expect(anchored.status).toBe(0);
    expect(JSON.parse(anchored.stdout)).toMatchObject({ firstSeq: 4, anchored: true });
    expect(anchored.stderr).toMatch(unpinned);

    // Records 4 and 5 removed in the database before the export: nothing vouches for record 6's
    // prevHash, and the verifier says so beside its answer (its exit status stays 0).
    const fromSix = log.slice(5);
    const unanchored = await verify([keys, ...fromSix, eight, await endOf(fromSix, signer)]);
    expect(unanchored.status).toBe(0);
    expect(JSON.parse(unanchored.stdout)).toMatchObject({
      firstSeq: 6,
      firstPrevHash: log[4]!.hash,
      anchored: false,
    });
    const [notice, ...rest] = unanchored.stderr.split('\n');
    expect(notice).toBe(
      'realmgate: record 6, the first of this export, is not anchored: no checkpoint of the ' +
        'export vouches for its prevHash, so whoever could write the log or this file could have ' +
        'removed records before it (an export of a time range starts so, unless a checkpoint ' +
        'names the record just before its first). Check that the export of what comes before ' +
        `holds record 5 with hash ${log[4]!.hash}, and verify it too.`,
    );
    expect(rest.join('\n')).toMatch(unpinned);
  });

  it("says whose keys checked the signatures: pinned ones prove who signed, the export's own do not", async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
    const log = chainedLog(3);
    const file = path.join(dir, 'signed.jsonl');
    const three = await signer.sign({
      org: 'acme',
      seq: 3,
      hash: log[2]!.hash,
      recordAt: log[2]!.at,
      at: '2026-11-02T00:00:00.000Z',
    });
    const lines = [
      { type: 'keys', keys: [signer.publicJwk] },
      ...log,
      { type: 'checkpoint', ...three },
      await endOf(log, signer),
    ];
    await writeFile(file, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
    const keysFile = path.join(dir, 'audit-keys.json');
    await writeFile(keysFile, JSON.stringify({ keys: [signer.publicJwk] }));

    const run = async (args: string[]) => {
      const { io, output } = capturingIo();
      const status = await runCli(['audit', 'verify', file, ...args], {}, io);
      return { status, keys: (JSON.parse(output.stdout) as { keys: unknown }).keys, ...output };
    };
    const own = await run([]);
    expect(own).toMatchObject({ status: 0, keys: 'export' });
    expect(own.stderr).toMatch(
      /^realmgate: the signatures were checked with the keys this export brings/,
    );
    expect(await run(['--keys', keysFile])).toMatchObject({
      status: 0,
      keys: 'pinned',
      stderr: '',
    });
  });

  it('refuses an export cut short, naming the last record it holds (exit 4)', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
    const log = chainedLog(8);
    const five = {
      type: 'checkpoint',
      ...(await signer.sign({
        org: 'acme',
        seq: 5,
        hash: log[4]!.hash,
        recordAt: log[4]!.at,
        at: '2026-11-02T00:00:00.000Z',
      })),
    };
    const keys = { type: 'keys', keys: [signer.publicJwk] };
    // Cut right after a checkpoint: every line whole, every line fits.
    const cut = await verify([keys, ...log.slice(0, 5), five]);
    expect(cut.status).toBe(4);
    expect(cut.stderr).toBe(
      'realmgate: the export is incomplete: it ends after record 5 (line 6) without its end ' +
        'line: it was cut short (or made before exports had one); export it again.\n',
    );
    const whole = [keys, ...log.slice(0, 5), five, ...log.slice(5), await endOf(log, signer)];
    expect((await verify(whole)).status).toBe(0);
    // Cut, with the end line of the whole moved up: it names records the file lacks.
    expect((await verify([...whole.slice(0, 7), whole.at(-1)])).stderr).toBe(
      'realmgate: the end line (line 8) does not fit: it says 8 records, 1 to 8, and the ' +
        'export holds 5, 1 to 5: records were removed or added.\n',
    );
    // Cut, with an end line that fits what is left: unsigned, or signed with another key.
    const unsignedEnd = await endOf(log.slice(0, 5));
    expect((await verify([...whole.slice(0, 7), unsignedEnd])).stderr).toMatch(
      /^realmgate: the end line \(line 8\) does not fit: it is not signed, and the export is/,
    );
    const { privateKey: other } = generateKeyPairSync('ed25519');
    const otherJwk = await exportJWK(createPublicKey(other));
    const forger = checkpointSigner(other, { ...otherJwk, kid, alg: 'EdDSA', use: 'sig' });
    expect(
      (await verify([...whole.slice(0, 7), await endOf(log.slice(0, 5), forger)])).stderr,
    ).toBe(
      `realmgate: the end line (line 8) does not fit: its signature does not verify with key ${kid}.\n`,
    );
    // A checkpoint's signature is no end line's.
    const asEnd = { ...unsignedEnd, kid, jws: five.jws };
    expect((await verify([...whole.slice(0, 7), asEnd])).stderr).toMatch(
      /^realmgate: the end line \(line 8\) does not fit: its JWS is not an end line/,
    );
    // Nothing after the end.
    expect((await verify([...whole, log[7]])).stderr).toBe(
      'realmgate: line 12 comes after the end line (line 11).\n',
    );
  });

  it('refuses a field no hash or signature covers, in a record or a checkpoint', async () => {
    const log = chainedLog(3);
    const end = await endOf(log);
    const added = [log[0], { ...log[1]!, approvedBy: 'cfo' }, log[2], end];
    expect(await verify(added)).toMatchObject({
      status: 4,
      stderr:
        'realmgate: record 2 (line 2) does not fit: its field approvedBy is not covered by its ' +
        'hash (not as the gateway exports it).\n',
    });
    const { privateKey } = generateKeyPairSync('ed25519');
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
    const claims = {
      org: 'acme',
      seq: 3,
      hash: log[2]!.hash,
      recordAt: log[2]!.at,
      at: log[2]!.at,
    };
    const checkpoint = { type: 'checkpoint', ...(await signer.sign(claims)), note: 'all good' };
    const keys = { type: 'keys', keys: [signer.publicJwk] };
    expect(await verify([keys, ...log, checkpoint, await endOf(log, signer)])).toMatchObject({
      status: 4,
      stderr:
        'realmgate: checkpoint 3 (line 5) does not fit: its field note is not covered by its ' +
        'signature (not as the gateway exports it).\n',
    });
  });

  it('refuses a file that is no export, and one that is not there', async () => {
    expect((await verify([{ not: 'a record' }])).stderr).toBe(
      'realmgate: line 1 is not an audit record.\n',
    );
    // A record whose details are not an object is no record either (not a crash of the CLI).
    for (const details of [null, ['a', 'b']]) {
      const [first] = chainedLog(1);
      expect(await verify([{ ...first!, details }])).toMatchObject({
        status: 4,
        stderr: 'realmgate: line 1 is not an audit record.\n',
      });
    }
    const { io, output } = capturingIo();
    expect(await runCli(['audit', 'verify', path.join(dir, 'missing.jsonl')], {}, io)).toBe(2);
    expect(output.stderr).toMatch(/^realmgate: cannot read /);
  });
});
