import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { inject } from 'postject';
import { bundleCli } from './build.ts';

/*
 * The CLI as one executable file that needs no Node at all (a Node single executable
 * application): this very Node binary with the CommonJS bundle of src/cli injected, as Node's
 * documentation on single executable applications describes. Linux only, as scripts/node24.sh.
 *
 *   npm run cli:sea    (node packages/cli/sea.ts on Node 24): realmgate-linux-x64 here
 */

/** The marker Node's binary carries for an injected application (Node's documentation). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** Builds `realmgate-<platform>-<arch>` into `destination` and returns its path. */
export async function buildSea(destination: string): Promise<string> {
  if (process.platform !== 'linux') {
    throw new Error('the single executable is built on Linux only (macOS would need signing)');
  }
  const staging = await mkdtemp(path.join(tmpdir(), 'realmgate-sea-'));
  try {
    const script = path.join(staging, 'realmgate.cjs');
    const target = `node${process.versions.node.split('.')[0]}`;
    await bundleCli(script, { format: 'cjs', target, shebang: false });
    const config = path.join(staging, 'sea-config.json');
    const blob = path.join(staging, 'realmgate.blob');
    const sea = { main: script, output: blob, disableExperimentalSEAWarning: true };
    await writeFile(config, JSON.stringify(sea));
    // The blob must come from the same Node as the binary it goes into.
    await promisify(execFile)(process.execPath, ['--experimental-sea-config', config]);
    const executable = path.join(destination, `realmgate-${process.platform}-${process.arch}`);
    await copyFile(process.execPath, executable);
    await inject(executable, 'NODE_SEA_BLOB', await readFile(blob), { sentinelFuse: SEA_FUSE });
    await chmod(executable, 0o755);
    return executable;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const executable = await buildSea(process.cwd());
  process.stdout.write(`${path.relative(process.cwd(), executable)}: runs without Node\n`);
}
