import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build, type Plugin } from 'esbuild';

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
  /** The package's manifest as packed. */
  manifest: Record<string, unknown>;
}

/** The packages of node_modules the bundle holds code of. */
const BUNDLED_PACKAGES = ['jose', 'oauth4webapi', 'openid-client'];

/** The root package.json: realmgate's one version (src/release/version.ts reads it too). */
const rootManifest = path.join(root, 'package.json');

/** The root manifest's version: the CLI is released with the gateway, under one number. */
export async function rootVersion(): Promise<string> {
  const { version } = JSON.parse(await readFile(rootManifest, 'utf8')) as { version?: unknown };
  if (typeof version !== 'string') throw new Error('package.json has no version');
  return version;
}

/**
 * The package's manifest: packages/cli/package.json, which writes no version, with the root's
 * version, without its scripts (they only stop `npm pack` of the unbuilt folder).
 */
export async function cliManifest(): Promise<Record<string, unknown>> {
  const manifest = JSON.parse(await readFile(path.join(here, 'package.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  delete manifest.scripts;
  const { name, ...rest } = manifest;
  // The version after the name, where npm writes it.
  return { name, version: await rootVersion(), ...rest };
}

/**
 * Builds the package into `dir`: its manifest, README, the bundle and its packages' licences;
 * returns the files bundled and the manifest.
 */
async function buildInto(
  dir: string,
): Promise<{ inputs: string[]; manifest: Record<string, unknown> }> {
  const manifest = await cliManifest();
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
  return { inputs, manifest };
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
    plugins: [versionOnly],
  });
  // What ended up in the bundle (jose's index names modules that tree shaking drops).
  const [output] = Object.values(metafile.outputs);
  return Object.entries(output?.inputs ?? {})
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([file]) => file)
    .sort();
}

/**
 * src/release/version.ts imports the root package.json for its version: the bundle gets that
 * field only, not the gateway's description and dependency list.
 */
const versionOnly: Plugin = {
  name: 'root-manifest-version-only',
  setup(builder) {
    builder.onLoad({ filter: /package\.json$/ }, async (args) =>
      args.path === rootManifest
        ? { contents: JSON.stringify({ version: await rootVersion() }), loader: 'json' }
        : undefined,
    );
  },
};

/**
 * Builds the package and packs it with `npm pack` into `destination`. `env` is the environment
 * npm runs in (default: this process's).
 */
export async function packCli(destination: string, env = process.env): Promise<CliPack> {
  const staging = await mkdtemp(path.join(tmpdir(), 'realmgate-cli-build-'));
  try {
    const { inputs, manifest } = await buildInto(staging);
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
      manifest,
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
