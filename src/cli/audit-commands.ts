import { readKeys, verifyExport } from './audit-verify.ts';
import { sessionCommand, type CommandEntry } from './command-spec.ts';

export { verifyExport };

/** `realmgate audit verify FILE [--keys URL|FILE]`: offline unless the keys are fetched. */
export const AUDIT_COMMANDS: readonly CommandEntry[] = [
  sessionCommand({
    name: 'audit verify',
    positionals: ['file'],
    options: { keys: { value: 'url|file' } },
    parse: (args) => ({ file: args.at(0), keys: args.one('keys') }),
    run: async ({ file, keys }) => ({
      json: await verifyExport(file, keys === undefined ? undefined : await readKeys(keys)),
    }),
  }),
];
