import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, type JSONWebKeySet, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../../src/audit/audit-chain.ts';
import {
  checkpointSigner,
  type Checkpoint,
  type CheckpointSigner,
} from '../../../src/audit/audit-checkpoints.ts';
import { signedJsonLines } from '../../../src/audit/audit-export-signed.ts';
import { createExportVerifier, type Verified } from '../../../src/audit/export-verifier.ts';
import { chainedLog } from '../../helpers/audit-records.ts';

/** Each signer made, by its key's id: an export's end line is signed by its first key's. */
const signers = new Map<string, CheckpointSigner>();

async function newSigner(): Promise<CheckpointSigner> {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = await exportJWK(createPublicKey(privateKey));
  const kid = await calculateJwkThumbprint(jwk);
  const signer = checkpointSigner(privateKey, { ...jwk, kid, alg: 'EdDSA', use: 'sig' });
  signers.set(kid, signer);
  return signer;
}

const signOf = (signer: CheckpointSigner, record: AuditRecord) =>
  signer.sign({
    org: record.org,
    seq: record.seq,
    hash: record.hash,
    recordAt: record.at,
    at: '2026-11-02T00:00:00.000Z',
  });

const setOf = (...signers: CheckpointSigner[]): JSONWebKeySet => ({
  keys: signers.map((s) => s.publicJwk),
});

/** An export as the gateway streams it: through signedJsonLines, parsed back into lines. */
async function exportOf(
  records: AuditRecord[],
  checkpoints: Checkpoint[],
  keys: JSONWebKeySet,
): Promise<unknown[]> {
  // eslint-disable-next-line @typescript-eslint/require-await -- an async source, as the database's
  async function* stream() {
    yield* records;
  }
  const lines: unknown[] = [];
  const signatures = {
    keys: () => Promise.resolve(keys),
    lastSigned: () => Promise.resolve(Math.max(0, ...checkpoints.map((c) => c.seq))),
    // eslint-disable-next-line @typescript-eslint/require-await -- an async source, as the database's
    async *checkpoints(_org: string, from: number, through: number) {
      yield* checkpoints.filter((c) => c.seq >= from && c.seq <= through);
    },
    signer: async () => signers.get(keys.keys[0]?.kid ?? '') ?? (await newSigner()),
    now: () => Date.UTC(2026, 10, 2),
  };
  // The export's span (audit-log.repo.ts): through its last record or checkpoint.
  const lastSeq = Math.max(0, ...records.map((r) => r.seq), ...checkpoints.map((c) => c.seq));
  for await (const line of signedJsonLines('acme', stream(), signatures, lastSeq)) {
    lines.push(JSON.parse(line));
  }
  return lines;
}

async function verify(lines: unknown[], pinned?: JSONWebKeySet): Promise<Verified> {
  const verifier = createExportVerifier(pinned);
  for (const [i, line] of lines.entries()) await verifier.line(line, i + 1);
  return verifier.finish();
}

describe('signed checkpoints of an audit log', () => {
  it('verifies an export: its chain and each checkpoint, from the first record', async () => {
    const signer = await newSigner();
    const log = chainedLog(10);
    const checkpoints = [await signOf(signer, log[4]!), await signOf(signer, log[9]!)];
    const lines = await exportOf(log, checkpoints, setOf(signer));
    expect(lines[0]).toEqual({ type: 'keys', keys: [signer.publicJwk] });
    // Each checkpoint right after its record.
    expect(lines[6]).toMatchObject({ type: 'checkpoint', seq: 5 });
    expect(await verify(lines)).toEqual({
      records: 10,
      org: 'acme',
      firstSeq: 1,
      firstPrevHash: log[0]!.prevHash,
      lastSeq: 10,
      lastHash: log[9]!.hash,
      checkpoints: 2,
      anchored: true,
      signedThrough: 10,
      keys: 'export',
    });
  });

  it('names a record edited after it was signed', async () => {
    const signer = await newSigner();
    const log = chainedLog(6);
    const checkpoints = [await signOf(signer, log[5]!)];
    log[2] = { ...log[2]!, actorName: 'mallory' };
    await expect(verify(await exportOf(log, checkpoints, setOf(signer)))).rejects.toThrow(
      'record 3 (line 4) does not fit: its hash does not match its content.',
    );
  });

  it('names the record after one removed', async () => {
    const signer = await newSigner();
    const log = chainedLog(6);
    const checkpoints = [await signOf(signer, log[5]!)];
    log.splice(3, 1);
    await expect(verify(await exportOf(log, checkpoints, setOf(signer)))).rejects.toThrow(
      /^record 5 \(line 5\) does not fit: it is number 5, after 3/,
    );
  });

  it('catches a tail cut off: the checkpoint names a record the export lacks', async () => {
    const signer = await newSigner();
    const log = chainedLog(6);
    const checkpoints = [await signOf(signer, log[5]!)];
    const lines = await exportOf(log.slice(0, 4), checkpoints, setOf(signer));
    await expect(verify(lines)).rejects.toThrow(
      'checkpoint 6 (line 6) does not fit: it names record 6, which the export lacks: records after 4 were removed.',
    );
  });

  it('refuses a checkpoint signed with a key not among those given, and a forged one', async () => {
    const signer = await newSigner();
    const stranger = await newSigner();
    const log = chainedLog(3);
    const lines = await exportOf(log, [await signOf(stranger, log[2]!)], setOf(signer));
    await expect(verify(lines)).rejects.toThrow(
      `checkpoint 3 (line 5) does not fit: it is signed with key ${stranger.kid}, which is not among the keys.`,
    );
    // An export that brings its forger's key verifies by itself: the auditor pins the gateway's.
    const forged = await exportOf(log, [await signOf(stranger, log[2]!)], setOf(stranger));
    await expect(verify(forged)).resolves.toMatchObject({ signedThrough: 3 });
    await expect(verify(forged, setOf(signer))).rejects.toThrow(/not among the keys/);
    // The right kid, the wrong key behind it.
    const impostor: JWK = { ...stranger.publicJwk, kid: signer.kid };
    const swapped = await exportOf(log, [await signOf(signer, log[2]!)], { keys: [impostor] });
    await expect(verify(swapped)).rejects.toThrow(
      `checkpoint 3 (line 5) does not fit: its signature does not verify with key ${signer.kid}.`,
    );
  });

  it('refuses a checkpoint whose fields differ from what its signature covers', async () => {
    const signer = await newSigner();
    const log = chainedLog(3);
    const checkpoint = await signOf(signer, log[2]!);
    const lines = await exportOf(
      log,
      [{ ...checkpoint, at: '2030-01-01T00:00:00.000Z' }],
      setOf(signer),
    );
    await expect(verify(lines)).rejects.toThrow(/its fields are not those its signature covers/);
  });

  it('verifies checkpoints of a rotated key and of the new one, both published', async () => {
    const before = await newSigner();
    const after = await newSigner();
    const log = chainedLog(6);
    const checkpoints = [await signOf(before, log[2]!), await signOf(after, log[5]!)];
    const keys = setOf(after, before);
    await expect(verify(await exportOf(log, checkpoints, keys))).resolves.toMatchObject({
      checkpoints: 2,
      signedThrough: 6,
    });
    // Without the old key, its checkpoint no longer verifies.
    await expect(verify(await exportOf(log, checkpoints, setOf(after)))).rejects.toThrow(
      /^checkpoint 3 .*not among the keys/,
    );
  });

  it('anchors a log whose oldest records retention removed, at the checkpoint before', async () => {
    const signer = await newSigner();
    const log = chainedLog(10);
    const checkpoints = [await signOf(signer, log[3]!), await signOf(signer, log[9]!)];
    const kept = log.slice(4);
    const lines = await exportOf(kept, checkpoints, setOf(signer));
    expect(lines[1]).toMatchObject({ type: 'checkpoint', seq: 4 });
    await expect(verify(lines)).resolves.toMatchObject({
      firstSeq: 5,
      anchored: true,
      checkpoints: 2,
    });
    // The first remaining record removed as well: no checkpoint vouches for the start, and the
    // verifier says so (`anchored: false`) rather than taking it on trust.
    await expect(
      verify(await exportOf(log.slice(5), checkpoints, setOf(signer))),
    ).resolves.toMatchObject({ firstSeq: 6, anchored: false });
  });

  it('says records after the last checkpoint are chained but not yet signed', async () => {
    const signer = await newSigner();
    const log = chainedLog(8);
    const lines = await exportOf(log, [await signOf(signer, log[4]!)], setOf(signer));
    await expect(verify(lines)).resolves.toMatchObject({ lastSeq: 8, signedThrough: 5 });
  });
});
