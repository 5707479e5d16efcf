import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { JSONWebKeySet } from 'jose';
import { createExportVerifier, ExportMisfit, type Verified } from '../audit/export-verifier.ts';
import { readAnswerText } from './client.ts';
import { CliError } from './errors.ts';

/** How long the published keys may take to come. */
const KEYS_TIMEOUT_MS = 10_000;

/**
 * Follows a JSON Lines export of an audit log (docs/audit.md) line by line, without holding it
 * in memory: the chain of its records and the signature of its checkpoints, with `keys` when
 * given (the gateway's published ones) or else the keys the export carries. The first record or
 * checkpoint that does not fit fails the command, named by its sequence number and line.
 */
export async function verifyExport(file: string, keys?: JSONWebKeySet): Promise<Verified> {
  const verifier = createExportVerifier(keys);
  let line = 0;
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new CliError('verification', `line ${line} is not JSON: not an audit log export.`);
      }
      if (givesANameTwice(text)) {
        throw new CliError(
          'verification',
          `line ${line} gives a field twice: not as the gateway exports it (a reader would see another value than the one verified).`,
        );
      }
      await verifier.line(value, line);
    }
    return verifier.finish();
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof ExportMisfit) throw new CliError('verification', err.message);
    throw new CliError('config', `cannot read ${file}: ${(err as Error).message}`);
  }
}

/**
 * Said when nothing in the export vouches for its first record's `prevHash`: whoever could write
 * the log could have removed the records before it (the first of a time range, or more) and the
 * export would verify. A time range's export starts so unless a checkpoint names the record just
 * before its first; the export of what comes before, chained to it, covers that.
 * Undefined when the export is anchored (or holds no record).
 */
export function unanchoredNotice(verified: Verified): string | undefined {
  const { records, firstSeq, firstPrevHash, anchored } = verified;
  if (anchored || records === 0 || firstSeq === null) return undefined;
  return (
    `record ${firstSeq}, the first of this export, is not anchored: no checkpoint of the export ` +
    'vouches for its prevHash, so whoever could write the log or this file could have removed ' +
    'records before it (an export of a time range starts so, unless a checkpoint names the ' +
    'record just before its first). Check that the export of what comes before holds record ' +
    `${firstSeq - 1} with hash ${firstPrevHash}, and verify it too.`
  );
}

/**
 * What `verified` could not vouch for, said beside its answer: the records after the last one a
 * checkpoint covers (all of them when none does). Their chain holds, but a chain is no signature:
 * whoever could write the log or the file could have changed them, added some or removed some
 * at the end, with the checkpoint that named them. Most exports end so too (the checkpoint
 * after their last record names a later one, not theirs): the verifier cannot tell the two
 * apart, and says how a reader covers them (the export of what follows, chained to them).
 * Undefined when every record is covered.
 */
export function unsignedNotice(verified: Verified): string | undefined {
  const { records, firstSeq, lastSeq, lastHash, signedThrough } = verified;
  if (records === 0 || firstSeq === null || lastSeq === null) return undefined;
  const from = signedThrough === null ? firstSeq : signedThrough + 1;
  if (from > lastSeq) return undefined;
  const count = lastSeq - from + 1;
  const which =
    count === 1 ? `record ${from} (1) is` : `records ${from} to ${lastSeq} (${count}) are`;
  const what =
    signedThrough === null
      ? `no record of this export is covered by a signature: ${which} chained only`
      : `${which} not covered by a signature`;
  return (
    `${what}: the chain holds, but whoever could write the log or this file could have changed ` +
    'records there, added some or removed some (an export ends after its last checkpoint, or ' +
    'a checkpoint was taken out). A later checkpoint covers them: check that the export of ' +
    `what follows starts with record ${lastSeq + 1} and prevHash ${lastHash}, and verify it too.`
  );
}

/**
 * Said when the signatures were checked with the keys the export brings: they show the file
 * whole, not that the gateway signed it (whoever rewrote the file could sign it with a key of
 * their own and list that). Undefined when the auditor pinned the keys, or nothing was signed.
 */
export function unpinnedNotice(verified: Verified): string | undefined {
  if (verified.keys !== 'export') return undefined;
  return (
    'the signatures were checked with the keys this export brings, which anyone rewriting it ' +
    "could replace: to prove the gateway signed it, pin the gateway's keys (--keys with its " +
    '/.well-known/audit-keys, fetched yourself).'
  );
}

/**
 * Whether some object of a JSON text (one `JSON.parse` took) names a field twice. `JSON.parse`
 * keeps the last value, and the hash is checked against it, while another reader (a SIEM, a
 * person) may take the first: a line with `"actorName":"mallory"` before the verified
 * `"actorName":"alice"` would pass. The gateway never writes one.
 */
export function givesANameTwice(text: string): boolean {
  // One entry per open bracket: the names an object gave so far, undefined for an array.
  const open: (Set<string> | undefined)[] = [];
  let atName = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (atName) {
        const names = open.at(-1)!;
        const name = JSON.parse(text.slice(i, end + 1)) as string;
        if (names.has(name)) return true;
        names.add(name);
        atName = false;
      }
      i = end;
    } else if (c === '{') {
      open.push(new Set());
      atName = true;
    } else if (c === '[') {
      open.push(undefined);
      atName = false;
    } else if (c === '}' || c === ']') {
      open.pop();
      atName = false;
    } else if (c === ',') {
      atName = open.at(-1) !== undefined;
    }
  }
  return false;
}

/**
 * The keys `--keys` names: the gateway's published set (`https://.../.well-known/audit-keys`),
 * or a file holding one (saved from there).
 */
export async function readKeys(source: string): Promise<JSONWebKeySet> {
  let text: string;
  try {
    if (/^https?:\/\//i.test(source)) {
      const answer = await fetch(source, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(KEYS_TIMEOUT_MS),
      });
      if (!answer.ok) throw new Error(`the answer was ${answer.status}`);
      text = await readAnswerText(answer, source);
    } else text = await readFile(source, 'utf8');
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError('config', `cannot read the keys at ${source}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError('config', `${source} is not JSON: not a key set.`);
  }
  const listed = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(listed)) throw new CliError('config', `${source} is not a key set (no keys).`);
  return { keys: listed as JSONWebKeySet['keys'] };
}
