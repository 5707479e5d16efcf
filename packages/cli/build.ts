import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';

/*
 * Builds and packs the realmgate-cli package from src/cli: one JavaScript file holding all it
 * imports (nothing to install beside it), for Node 20 and later, which cannot run the TypeScript
 * sources. The package is put together in a temporary folder, so a build never leaves files in
 * the checkout and two builds at once do not meet.
 *
 *   npm run cli:pack    (node packages/cli/build.ts on Node 24): realmgate-cli-<version>.tgz here
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
/** The oldest Node the package supports (its `engines`); esbuild refuses syntax beyond it. */
const TARGET = 'node20';

/** A packed CLI: the tarball, what npm put in it, and the source files bundled. */
export interface CliPack {
  tarball: string;
  /** Bytes of the tarball. */
  size: number;
  /** Paths inside the package, as npm lists them. */
  files: string[];
  /** The files the bundle holds code of, relative to the repository. */
  inputs: string[];
}

/** The packages of node_modules the bundle holds code of. */
const BUNDLED_PACKAGES = ['jose', 'oauth4webapi', 'openid-client'];

/** Builds the package into `dir`: its manifest, README, the bundle and its packages' licences. */
async function buildInto(dir: string): Promise<string[]> {
  const manifest = JSON.parse(await readFile(path.join(here, 'package.json'), 'utf8')) as {
    scripts?: unknown;
  };
  // The manifest's scripts only stop `npm pack` of the unbuilt folder; the package needs none.
  delete manifest.scripts;
  await writeFile(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  await copyFile(path.join(here, 'README.md'), path.join(dir, 'README.md'));
  await mkdir(path.join(dir, 'dist'));
  const bundle = path.join(dir, 'dist', 'realmgate.js');
  const inputs = await bundleCli(bundle, { format: 'esm', target: TARGET, shebang: true });
  // What comes from node_modules (jose, openid-client and its oauth4webapi, all MIT): their
  // licences travel with it.
  for (const name of BUNDLED_PACKAGES) {
    await copyFile(
      path.join(root, 'node_modules', name, 'LICENSE.md'),
      path.join(dir, 'dist', `LICENSE.${name}.md`),
    );
  }
  return inputs;
}

/**
 * Bundles src/cli into `outfile` for Node `target` (`node20`), as an ES module or a CommonJS
 * script, `#!/usr/bin/env node` first if `shebang`; returns the files it holds code of,
 * relative to the repository.
 */
export async function bundleCli(
  outfile: string,
  { format, target, shebang }: { format: 'esm' | 'cjs'; target: string; shebang: boolean },
): Promise<string[]> {
  const { metafile } = await build({
    entryPoints: [path.join(root, 'src/cli/bin.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format,
    target,
    ...(shebang && { banner: { js: '#!/usr/bin/env node' } }),
    metafile: true,
    logLevel: 'warning',
    absWorkingDir: root,
  });
  // What ended up in the bundle (jose's index names modules that tree shaking drops).
  const [output] = Object.values(metafile.outputs);
  return Object.entries(output?.inputs ?? {})
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([file]) => file)
    .sort();
}

/**
 * Builds the package and packs it with `npm pack` into `destination`. `env` is the environment
 * npm runs in (default: this process's).
 */
export async function packCli(destination: string, env = process.env): Promise<CliPack> {
  const staging = await mkdtemp(path.join(tmpdir(), 'realmgate-cli-build-'));
  try {
    const inputs = await buildInto(staging);
    const { stdout } = await promisify(execFile)(
      'npm',
      ['pack', staging, '--pack-destination', destination, '--json', '--ignore-scripts'],
      { env, timeout: 120_000 },
    );
    const [packed] = JSON.parse(stdout) as Array<{
      filename: string;
      size: number;
      files: Array<{ path: string }>;
    }>;
    return {
      tarball: path.join(destination, packed!.filename),
      size: packed!.size,
      files: packed!.files.map((file) => file.path).sort(),
      inputs,
    };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { tarball, size, files, inputs } = await packCli(process.cwd());
  process.stdout.write(
    `${path.relative(process.cwd(), tarball)}: ${size} bytes, ${files.join(', ')} ` +
      `(bundled from ${inputs.length} files)\n`,
  );
}
