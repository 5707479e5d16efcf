import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REVISION_VARIABLE } from '../../src/release/build-info.ts';

/*
 * Keeps the Dockerfile consistent with package.json and the source layout: the base image, the
 * entry file, what is copied, and that `npm ci --omit=dev` installs every package the copied
 * code imports at run time. The compose suite (test/compose/) builds and runs it for real.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');

/** Instructions, one per line: continuation lines joined, comments and blank lines dropped. */
const instructions = read('Dockerfile')
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const ignored = read('.dockerignore')
  .split('\n')
  .map((l) => l.trim().replace(/\/$/, ''))
  .filter((l) => l !== '' && !l.startsWith('#'));
const pkg = JSON.parse(read('package.json')) as {
  engines: { node: string };
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** The source paths of every COPY (the last argument is the destination). */
const copied = instructions
  .filter((l) => l.startsWith('COPY '))
  .flatMap((l) =>
    l
      .split(/\s+/)
      .slice(1)
      .filter((a) => !a.startsWith('--'))
      .slice(0, -1),
  );

/** `CMD ["node", "src/main.ts"]` -> ['node', 'src/main.ts']. */
const command = JSON.parse(instructions.at(-1)!.replace(/^CMD\s+/, '')) as string[];

function isCopied(file: string): boolean {
  const relative = path.relative(root, file);
  return copied.some((source) =>
    source.endsWith('/') ? relative.startsWith(source) : relative === source,
  );
}

function tsFilesUnder(dir: string): string[] {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(root, dir, f));
}

/**
 * The module specifiers a file loads at run time: static imports and re-exports (without
 * `import type` / `export type`, which type stripping erases) and literal dynamic imports.
 * Statements end with `;` (prettier), so `[^;]` keeps a match inside one statement.
 */
export function runtimeImports(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(/^(import|export)\s([^;]*?)\bfrom\s*['"]([^'"]+)['"]/gm)) {
    if (!/^type\s/.test(m[2]!)) found.push(m[3]!);
  }
  for (const m of source.matchAll(/^import\s*['"]([^'"]+)['"]/gm)) found.push(m[1]!);
  for (const m of source.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push(m[1]!);
  return found;
}

/** `@scope/name/sub` -> `@scope/name`, `name/sub` -> `name`; undefined for relative and builtins. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/')) return undefined;
  if (specifier.startsWith('node:') || builtinModules.includes(specifier)) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

describe('runtimeImports', () => {
  it('keeps value imports, re-exports and dynamic imports, drops type-only ones', () => {
    const source = [
      "import express from 'express';",
      "import {\n  a,\n  type B,\n} from './a.ts';",
      "import type { Logger } from 'pino';",
      "export type { X } from './x.ts';",
      "export { y } from './y.ts';",
      "import './side-effect.ts';",
      "const lazy = await import('otplib');",
      "const url = 'http://example.test/from/here';",
    ].join('\n');
    expect(runtimeImports(source)).toEqual([
      'express',
      './a.ts',
      './y.ts',
      './side-effect.ts',
      'otplib',
    ]);
  });
});

describe('Dockerfile', () => {
  it('builds on the Node 24 image that package.json "engines" and scripts/node24.sh name', () => {
    const engines = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(pkg.engines.node);
    expect(engines, `engines.node ${pkg.engines.node}`).not.toBeNull();
    const major = engines![1];
    // The upstream image by default; CI builds a stand-in of it and names it (ops/images/).
    expect(instructions.slice(0, 2)).toEqual([
      `ARG NODE_IMAGE=node:${major}-bookworm-slim`,
      'FROM ${NODE_IMAGE}',
    ]);
    expect(major).toBe('24');
    // CI's pinned version lies in the supported range.
    const pinned = /^NODE24_VERSION=(\d+)\.(\d+)\.(\d+)$/m.exec(read('scripts/node24.sh'));
    expect(pinned).not.toBeNull();
    expect(pinned![1]).toBe(major);
    expect(Number(pinned![2]) * 1000 + Number(pinned![3])).toBeGreaterThanOrEqual(
      Number(engines![2]) * 1000 + Number(engines![3]),
    );
  });

  it('starts the copied entry file with plain node, as the unprivileged node user', () => {
    expect(command).toEqual(['node', 'src/main.ts']);
    expect(existsSync(path.join(root, command[1]!))).toBe(true);
    expect(isCopied(path.join(root, command[1]!))).toBe(true);
    expect(instructions).toContain('ENV NODE_ENV=production');
    expect(instructions).toContain('USER node');
    expect(instructions).toContain('EXPOSE 8000 8001');
    expect(instructions.find((l) => l.startsWith('HEALTHCHECK'))).toContain(
      "fetch('http://127.0.0.1:' + (process.env.PORT || 8000) + '/healthz'",
    );
  });

  it('has no tsx: no loader in the image and none among the runtime dependencies', () => {
    expect(instructions.filter((l) => /\btsx\b|--import|--loader/.test(l))).toEqual([]);
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
  });

  it('copies only paths that exist and are not excluded from the build context', () => {
    expect(copied).toEqual([
      'package.json',
      'package-lock.json',
      'src/',
      'keycloak/',
      'realm-export/',
    ]);
    expect(copied.filter((s) => !existsSync(path.join(root, s)))).toEqual([]);
    expect(copied.filter((s) => ignored.includes(s.replace(/\/$/, '')))).toEqual([]);
  });

  it('keeps local state and secrets out of the build context', () => {
    expect(ignored).toEqual([
      'node_modules',
      '.data',
      '.keycloak',
      '.git',
      'coverage',
      'bench/results',
      '.scratch',
      '.env',
      '*.log',
    ]);
  });

  it('copies every file the entry file reaches through relative imports', () => {
    const seen = new Set<string>();
    const missing: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      if (!existsSync(file) || !statSync(file).isFile() || !isCopied(file)) {
        missing.push(path.relative(root, file));
        return;
      }
      for (const specifier of runtimeImports(readFileSync(file, 'utf8'))) {
        if (specifier.startsWith('.')) visit(path.resolve(path.dirname(file), specifier));
      }
    };
    visit(path.join(root, command[1]!));
    expect(missing).toEqual([]);
    expect(seen.size).toBeGreaterThan(50);
  });

  it('installs runtime dependencies only, and they cover every package the copied code imports', () => {
    expect(instructions).toContain(
      'RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force',
    );
    const files = copied.filter((s) => s.endsWith('/')).flatMap((dir) => tsFilesUnder(dir));
    expect(files.length).toBeGreaterThan(50);
    const notInstalled = new Map<string, string>();
    for (const file of files) {
      for (const specifier of runtimeImports(readFileSync(file, 'utf8'))) {
        const name = packageOf(specifier);
        if (name && !(name in pkg.dependencies)) {
          notInstalled.set(
            `${path.relative(root, file)}: ${name}`,
            pkg.devDependencies[name] ?? '',
          );
        }
      }
    }
    // Each entry names the file, the package, and its devDependencies range if it is one.
    expect(Object.fromEntries(notInstalled)).toEqual({});
  });

  it('labels the image with its version, revision, source and creation time, from build arguments', () => {
    const labels = instructions.find((l) => l.startsWith('LABEL '));
    const annotations = Object.fromEntries(
      [...(labels ?? '').matchAll(/(org\.opencontainers\.image\.\w+)="([^"]*)"/g)].map(
        (m): [string, string] => [m[1]!, m[2]!],
      ),
    );
    expect(annotations).toMatchObject({
      'org.opencontainers.image.version': '${REALMGATE_VERSION}',
      'org.opencontainers.image.revision': '${REALMGATE_REVISION}',
      'org.opencontainers.image.source': '${REALMGATE_SOURCE}',
      'org.opencontainers.image.created': '${REALMGATE_CREATED}',
      'org.opencontainers.image.licenses': 'Apache-2.0',
    });
    for (const name of ['VERSION', 'REVISION', 'SOURCE', 'CREATED']) {
      expect(instructions, name).toContain(`ARG REALMGATE_${name}=unknown`);
    }
    // The revision reaches the gateway (start log, realmgate_build_info) in its environment.
    expect(instructions).toContain(`ENV ${REVISION_VARIABLE}=\${REALMGATE_REVISION}`);
  });

  it("refuses a version argument that is not package.json's, before installing anything", () => {
    const check = instructions.findIndex((l) => l.includes('require("./package.json").version'));
    expect(check).toBeGreaterThan(instructions.indexOf('COPY package.json package-lock.json ./'));
    expect(check).toBeLessThan(instructions.findIndex((l) => l.startsWith('RUN npm ci')));
    expect(instructions[check]).toContain('process.exit(1)');
    expect(instructions[check]).toMatch(/"\$\{REALMGATE_VERSION\}"$/);
  });

  it('declares the arguments that change with every commit after the last RUN, which keeps the layers cached', () => {
    const lastRun = instructions.findLastIndex((l) => l.startsWith('RUN '));
    for (const name of ['REVISION', 'SOURCE', 'CREATED']) {
      expect(instructions.indexOf(`ARG REALMGATE_${name}=unknown`), name).toBeGreaterThan(lastRun);
    }
    // The version changes once a release: declared before its check, after npm ci's inputs.
    expect(instructions.indexOf('ARG REALMGATE_VERSION=unknown')).toBeGreaterThan(
      instructions.indexOf('COPY package.json package-lock.json ./'),
    );
  });
});
