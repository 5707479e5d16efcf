import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * vitest runs test files side by side (vitest.config.ts, maxWorkers), and the integration files
 * listen on fixed ports: two files that claim one port fail with EADDRINUSE whenever they happen
 * to run at the same time. This reads the ports each file claims, as the suite writes them, and
 * names every port two files claim.
 */

const root = path.resolve(import.meta.dirname, '..');
const folders = ['integration', 'unit', 'helpers'];

/**
 * Calls that listen on their port argument, with the ports they take beyond it (the admin
 * listener at port + 1, a second replica at port + 2, a Keycloak relay at port + 5), and which
 * argument is the port.
 */
const listeners: { name: string; offsets: number[]; argument?: number }[] = [
  { name: 'startReplica', offsets: [0, 1] },
  { name: 'freshReplica', offsets: [0, 1] },
  { name: 'startClusteredGateway', offsets: [0, 1] },
  { name: 'replicasWithoutRecheck', offsets: [0, 1] },
  { name: 'refusedPastTheNewLifetime', offsets: [0, 1], argument: 1 },
  { name: 'startPair', offsets: [0, 1, 2, 3] },
  { name: 'replicaPair', offsets: [0, 1, 2, 3] },
  { name: 'startTwoWorkers', offsets: [0, 1, 5] },
  { name: 'startDatabaseRelay', offsets: [0] },
  { name: 'startKeycloakRelay', offsets: [0] },
  { name: 'startTcpFront', offsets: [0] },
  { name: 'startPostgresProcess', offsets: [0] },
  { name: 'startRedisServer', offsets: [0] },
  { name: 'listen', offsets: [0] },
];

function testFiles(): string[] {
  return folders.flatMap((folder) =>
    readdirSync(path.join(root, folder), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts'))
      .map((file) => path.join(folder, file))
      // This file's own examples are no ports.
      .filter((file) => file !== path.join('unit', 'test-ports.test.ts')),
  );
}

/** The code without comments: header comments name ports a file does not listen on too. */
function codeOf(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

function numbersIn(text: string): number[] {
  return (text.match(/\d+/g) ?? []).map(Number);
}

/** The ports `source` claims. */
function portsClaimed(source: string): Set<number> {
  const code = codeOf(source);
  const ports = new Set<number>();
  // Port values by name: `const PORT = 18600`, `port: 18880`, `ports: [18530, 18540]`,
  // `PORT: '18100'` (a replica's settings), `firstHttpPort: 28080`, `for (const port of [...])`.
  const named = new Map<string, number[]>();
  for (const [, name, value] of code.matchAll(
    /\b(\w*port\w*)\s*(?:=|:|of)\s*(\[[\d\s,]*\]|'\d+'|\d+)/gi,
  )) {
    const values = numbersIn(value!);
    named.set(name!, [...(named.get(name!) ?? []), ...values]);
    for (const port of values) ports.add(port);
    // Keycloak clusters (keycloak/cluster.ts) number their two nodes from these.
    if (/^first\w*Port$/.test(name!)) for (const port of values) ports.add(port + 1);
  }
  // `port + 7`, `PORT + 1`: a port beside a named one.
  const valuesOf = (name: string, offset: number) =>
    (named.get(name) ?? []).map((port) => port + offset);
  for (const [, name, offset] of code.matchAll(/\b(\w*port\w*)\s*\+\s*(\d+)\b/gi)) {
    for (const port of valuesOf(name!, Number(offset))) ports.add(port);
  }
  for (const { name, offsets, argument = 0 } of listeners) {
    const skipped = '[^,()]+,\\s*'.repeat(argument);
    const call = new RegExp(
      `\\b${name}\\(\\s*${skipped}(\\[[\\d\\s,]*\\]|\\d+|(\\w+)(?:\\s*\\+\\s*(\\d+))?)`,
      'g',
    );
    for (const [, literal, variable, plus] of code.matchAll(call)) {
      const bases =
        variable === undefined ? numbersIn(literal!) : valuesOf(variable, Number(plus ?? 0));
      for (const base of bases) for (const offset of offsets) ports.add(base + offset);
    }
  }
  return ports;
}

/**
 * The suites listen from 10000 up (the global gateway on 18000); below are port 0 (any the
 * system gives) and the deployment's defaults (8000, 8001) that unit tests only parse.
 */
function listenedOn(port: number): boolean {
  return port >= 10_000 && port <= 65_535;
}

describe('fixed ports of the test files', () => {
  it('reads the ports a file claims, with the ones its helpers take beside them', () => {
    const code = [
      'const PORT = 100;',
      "loadConfig({ ADMIN_PORT: '102' });",
      'await startReplica(200, {});',
      'const port = 300;',
      'relay = await startDatabaseRelay(port + 6);',
      'pair = await replicaPair(\n  400,\n  {},\n);',
      'replicasWithoutRecheck([500, 502]);',
      '// startReplica(900): a comment',
    ].join('\n');
    expect([...portsClaimed(code)].sort()).toEqual(
      [100, 102, 200, 201, 300, 306, 400, 401, 402, 403, 500, 501, 502, 503].sort(),
    );
  });

  it('claims each port in one file only', () => {
    const claims = new Map<number, string[]>();
    for (const file of testFiles()) {
      const source = readFileSync(path.join(root, file), 'utf8');
      for (const port of [...portsClaimed(source)].filter(listenedOn))
        claims.set(port, [...(claims.get(port) ?? []), file]);
    }
    const shared = [...claims]
      .filter(([, files]) => files.length > 1)
      .sort(([a], [b]) => a - b)
      .map(([port, files]) => `${port}: ${files.join(', ')}`);
    expect(shared).toEqual([]);
  });
});
