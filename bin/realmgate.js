#!/usr/bin/env node
// The CLI from a checkout: TypeScript like the rest of realmgate, which Node 24 strips itself (no
// loader, no build step). API clients install the built package instead (packages/cli), which
// runs on Node 20 and later.
import process from 'node:process';

if (Number(process.versions.node.split('.')[0]) < 24) {
  process.stderr.write(
    `realmgate from the checkout needs Node 24 (this is ${process.version}); ` +
      'export PATH="$(scripts/node24.sh):$PATH" puts the pinned one first, or install the ' +
      'CLI package, which runs on Node 20 and later: npm run cli:pack, then npm i -g ' +
      'realmgate-cli-<version>.tgz (README, "API clients")\n',
  );
  process.exit(1);
}
await import('../src/cli/bin.ts');
