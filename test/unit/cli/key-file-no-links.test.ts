import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { keyOfFile } from '../../../src/cli/key-file.ts';

// A file system without hard links (some network shares, FAT on a CI runner's mount): `link`
// is refused, and a file written there is seen by others as it grows, as a copy's is.
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const link: typeof actual.link = () =>
    Promise.reject(Object.assign(new Error('operation not permitted'), { code: 'EPERM' }));
  // A copy made as a copy is: the new file first, then its content, a part at a time.
  const copyFile: typeof actual.copyFile = async (from, to) => {
    const text = await actual.readFile(from);
    const handle = await actual.open(to, 'wx', 0o600);
    try {
      await handle.write(text.subarray(0, 20));
      await sleep(50);
      await handle.write(text.subarray(20));
    } finally {
      await handle.close();
    }
  };
  return { ...actual, link, copyFile };
});

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'realmgate-key-file-no-links-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('a key file made where the file system has no hard links', () => {
  it('is one whole key for logins that make it at the same time, 0600, nothing left beside it', async () => {
    const path = join(dir, 'host.key');
    const made = await Promise.allSettled(Array.from({ length: 8 }, () => keyOfFile(path)));
    const refused = made.flatMap((result) =>
      result.status === 'rejected' ? [String(result.reason)] : [],
    );
    expect(refused).toEqual([]);
    const keys = made.map((result) => (result.status === 'fulfilled' ? result.value : undefined));
    expect(new Set(keys.map((key) => JSON.stringify(key))).size).toBe(1);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(keys[0]);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(['host.key']);
  });
});
