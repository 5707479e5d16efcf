import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { createChainFollower, type AuditRecord } from '../audit/audit-chain.ts';
import { sessionCommand, type CommandEntry } from './command-spec.ts';
import { CliError } from './errors.ts';

/** What `audit verify` found in a whole export. */
interface Verified {
  records: number;
  org: string | null;
  firstSeq: number | null;
  lastSeq: number | null;
  /** The hash of the last record: what the next export's first `prevHash` must be. */
  lastHash: string | null;
}

/**
 * Follows a JSON Lines export of an audit log (docs/audit.md) record by record, without holding
 * it in memory; the first record that does not fit its chain fails the command, named by its
 * sequence number and line.
 */
export async function verifyExport(file: string): Promise<Verified> {
  const follower = createChainFollower();
  const verified: Verified = {
    records: 0,
    org: null,
    firstSeq: null,
    lastSeq: null,
    lastHash: null,
  };
  let line = 0;
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      const record = recordOf(text, line);
      const misfit = follower.next(record);
      if (misfit !== undefined) {
        throw new CliError(
          'verification',
          `record ${record.seq} (line ${line}) does not fit: ${misfit}.`,
        );
      }
      verified.records++;
      verified.org ??= record.org;
      verified.firstSeq ??= record.seq;
      verified.lastSeq = record.seq;
      verified.lastHash = record.hash;
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError('config', `cannot read ${file}: ${(err as Error).message}`);
  }
  return verified;
}

function recordOf(text: string, line: number): AuditRecord {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliError('verification', `line ${line} is not JSON: not an audit log export.`);
  }
  const record = value as Partial<AuditRecord>;
  if (
    typeof record !== 'object' ||
    record === null ||
    typeof record.hash !== 'string' ||
    typeof record.seq !== 'number' ||
    typeof record.details !== 'object'
  ) {
    throw new CliError('verification', `line ${line} is not an audit record.`);
  }
  return record as AuditRecord;
}

/** `realmgate audit verify FILE`: offline, no login needed. */
export const AUDIT_COMMANDS: readonly CommandEntry[] = [
  sessionCommand({
    name: 'audit verify',
    positionals: ['file'],
    parse: (args) => ({ file: args.at(0) }),
    run: async ({ file }) => ({ json: await verifyExport(file) }),
  }),
];
