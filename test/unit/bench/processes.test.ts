import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCommand } from '../../../bench/command-process.ts';
import {
  cpuGrowth,
  lastWords,
  runToCompletion,
  startChild,
  stopAllChildren,
} from '../../../bench/processes.ts';
import { startRows, type Scenario } from '../../../bench/scenarios.ts';

/*
 * A bench row whose process cannot start (a gateway that dies while loading, as on a Node
 * without node:zlib's zstd) is a row that says why, and the run goes on with the others.
 */

let dir: string;
let dying: string;
let ready: string;
let refusing: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'realmgate-bench-processes-'));
  dying = path.join(dir, 'dying.mjs');
  // What Node prints for an uncaught error at load, as the Node 20 row's gateway did.
  await writeFile(dying, 'const zlib = {};\nzlib.zstdDecompress.bind(zlib);\n');
  ready = path.join(dir, 'ready.mjs');
  await writeFile(
    ready,
    [
      "process.stdout.write(JSON.stringify({ ready: true, pid: process.pid }) + '\\n');",
      "process.stdin.on('end', () => process.exit(0)).resume();",
    ].join('\n'),
  );
  // Exits at once, its stdin never read (as a generator that fails before reading its spec).
  refusing = path.join(dir, 'refusing.mjs');
  await writeFile(refusing, "console.error('refusing: no input read');\nprocess.exit(3);\n");
});

afterAll(async () => {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
});

describe('startChild', () => {
  it('rejects a module that exits before its readiness line, with what its stderr said', async () => {
    const started = startChild(dying, {});
    await expect(started).rejects.toThrow(/dying\.mjs exited before it was ready \(1\)/);
    await expect(started).rejects.toThrow(
      /TypeError: Cannot read properties of undefined \(reading 'bind'\)/,
    );
  });

  it('resolves with the readiness line of a module that starts', async () => {
    const child = await startChild(ready, {});
    expect(child.ready).toMatchObject({ ready: true, pid: child.pid });
    await child.stop();
  });
});

describe('runToCompletion', () => {
  // More than a pipe holds: the module exits while the rest is still being written (EPIPE).
  const input = 'x'.repeat(8 * 1024 * 1024);

  it.each([
    ['at once', undefined],
    ['held until its start', { started: Promise.resolve(), onLine: () => undefined }],
  ])(
    'rejects a module that exits without reading its input (written %s), with its exit status',
    async (_how, hold) => {
      await expect(runToCompletion(refusing, input, 60_000, undefined, hold)).rejects.toThrow(
        /refusing\.mjs failed \(3\)/,
      );
    },
  );
});

describe('startRows', () => {
  const row = (id: string): Scenario => ({
    id,
    name: `row ${id}`,
    requests: [],
    port: 0,
    rounds: [],
  });

  it('marks a row whose process exits at once unavailable, with its reason, and starts the others', async () => {
    const rows = [row('limit'), row('dies'), row('starts'), row('absent')];
    rows[3]!.unavailable = 'left out before';
    const logged: string[] = [];
    await startRows(
      rows,
      { limit: { pid: 4242 } },
      (s) => startChild(s.id === 'dies' ? dying : ready, {}),
      (text) => logged.push(text),
    );
    const [limit, dies, starts, absent] = rows;
    expect(limit!.pid).toBe(4242);
    expect(dies!.pid).toBeUndefined();
    expect(dies!.unavailable).toMatch(/^did not start: .*exited before it was ready \(1\): /);
    expect(dies!.unavailable).toContain(
      "TypeError: Cannot read properties of undefined (reading 'bind')",
    );
    expect(starts!.pid).toBeGreaterThan(0);
    expect(starts!.unavailable).toBeUndefined();
    expect(absent!.unavailable).toBe('left out before');
    expect(absent!.pid).toBeUndefined();
    expect(logged).toEqual([`  row dies: ${dies!.unavailable}`]);
  });
});

describe('startCommand', () => {
  const server = (listen: string) => [
    process.execPath,
    '-e',
    `require('node:http').createServer((q, s) => s.end('ok')).listen(0, '127.0.0.1', function () { ${listen} })`,
  ];

  it('is ready once the command writes its ready text, and stops it', async () => {
    const command = server("console.log('up on', this.address().port)");
    const started = await startCommand({ command, port: 1, readyText: 'up on' });
    expect(started.commandPid).toBeGreaterThan(0);
    await started.stop();
    expect(() => process.kill(started.commandPid, 0)).toThrow();
  });

  it('is ready once its port accepts', async () => {
    const port = 28990 + Math.floor(Math.random() * 9);
    const command = [
      process.execPath,
      '-e',
      `require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1')`,
    ];
    const started = await startCommand({ command, port });
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
    await started.stop();
  });

  it('rejects a command that exits at once, with what it said last', async () => {
    const command = [
      process.execPath,
      '-e',
      "console.error('apache2: bad config'); process.exit(3)",
    ];
    await expect(startCommand({ command, port: 1 })).rejects.toThrow(
      /command-process\.ts exited before it was ready \(1\): .*apache2: bad config/,
    );
  });

  it('rejects a command that is not installed, naming it (a peer missing here)', async () => {
    await expect(startCommand({ command: ['/nonexistent/apache2'], port: 1 })).rejects.toThrow(
      /spawn \/nonexistent\/apache2 ENOENT/,
    );
  });
});

describe('lastWords', () => {
  it("keeps Node's error line and drops frames, carets and blank lines", () => {
    const stderr = [
      'file:///x/node_modules/undici/lib/interceptor/decompress.js:12',
      '  zstd: zlib.createZstdDecompress.bind(zlib)',
      '                                   ^',
      '',
      "TypeError: Cannot read properties of undefined (reading 'bind')",
      '    at file:///x/node_modules/undici/lib/interceptor/decompress.js:12:36',
      '    at ModuleJob.run (node:internal/modules/esm/module_job:234:25)',
      '',
      'Node.js v20.20.2',
    ];
    expect(lastWords(stderr)).toBe(
      "zstd: zlib.createZstdDecompress.bind(zlib) | TypeError: Cannot read properties of undefined (reading 'bind') | Node.js v20.20.2",
    );
    expect(lastWords([])).toBe('nothing on stderr');
  });
});

describe('cpuGrowth', () => {
  it('counts what each process alive at the second reading used since the first, never less than nothing', () => {
    const before = new Map([
      [10, 1.5],
      [11, 4],
      [12, 2],
    ]);
    // 10 used 0.25 s; 11 ended (a backend's connection closed); 12 ended as it was read (0);
    // 13 started meanwhile and counts whole.
    const after = new Map([
      [10, 1.75],
      [12, 0],
      [13, 0.5],
    ]);
    expect(cpuGrowth(before, after)).toBeCloseTo(0.75, 10);
  });
});
