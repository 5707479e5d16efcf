#!/usr/bin/env node
// The CLI is TypeScript like the rest of realmgate. Node 24 strips the types itself (no loader,
// no build step); type stripping does not apply under node_modules, so run it from a checkout.
import process from 'node:process';

if (Number(process.versions.node.split('.')[0]) < 24) {
  process.stderr.write(
    `realmgate needs Node 24 (this is ${process.version}); in the checkout, ` +
      'export PATH="$(scripts/node24.sh):$PATH" puts the pinned one first\n',
  );
  process.exit(1);
}
const { runCli } = await import('../src/cli/main.ts');
process.exitCode = await runCli(process.argv.slice(2), process.env, process);
