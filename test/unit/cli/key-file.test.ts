import { chmod, chown, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readLogins, writeLogins, type StoredLogin } from '../../../src/cli/credentials.ts';
import { generateDpopKey, thumbprintOf } from '../../../src/cli/dpop.ts';
import { keyFilePathOf, keyOfFile, readKeyFile } from '../../../src/cli/key-file.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'realmgate-key-file-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('a DPoP key kept in a file of its own', () => {
  it('is made 0600 on first use, then the same key is read back', async () => {
    const path = join(dir, 'job.key');
    const made = await keyOfFile(path);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(made);
    expect(await keyOfFile(path)).toEqual(made);
    expect(await readKeyFile(path, await thumbprintOf(made))).toEqual(made);
  });

  it('is one key for logins that make it at the same time, never a file half written', async () => {
    // Jobs of one host logging in at once with the same REALMGATE_KEY_FILE: one host key.
    const path = join(dir, 'host.key');
    const keys = await Promise.all(Array.from({ length: 8 }, () => keyOfFile(path)));
    expect(new Set(keys.map((key) => JSON.stringify(key))).size).toBe(1);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(keys[0]);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    // Nothing is left beside it.
    expect(await readdir(dir)).toEqual(['host.key']);
  });

  it('takes --key-file, else REALMGATE_KEY_FILE, as an absolute path', () => {
    expect(keyFilePathOf('/a/k', { REALMGATE_KEY_FILE: '/b/k' })).toBe('/a/k');
    expect(keyFilePathOf(undefined, { REALMGATE_KEY_FILE: 'k.json' })).toBe(resolve('k.json'));
    expect(keyFilePathOf(undefined, {})).toBeUndefined();
  });

  it('refuses a missing, open, foreign or broken key file, saying which and why', async () => {
    const path = join(dir, 'job.key');
    const key = await keyOfFile(path);
    const jkt = await thumbprintOf(key);
    await expect(readKeyFile(join(dir, 'none.key'), jkt)).rejects.toThrow(
      /key file .*none\.key does not exist: a login that keeps its key apart works only where/,
    );
    await expect(readKeyFile(path, await thumbprintOf(await generateDpopKey()))).rejects.toThrow(
      'is not the key this login is bound to',
    );
    await chmod(path, 0o640);
    await expect(readKeyFile(path, jkt)).rejects.toThrow('is open to other users (mode 640)');
    await writeFile(join(dir, 'oct.key'), '{"kty":"oct","k":"c2VjcmV0"}', { mode: 0o600 });
    await expect(readKeyFile(join(dir, 'oct.key'), jkt)).rejects.toThrow(
      'is not a P-256 private key (JWK)',
    );
  });

  it('refuses a key file another user owns: one planted in a directory others can write', async () => {
    const path = join(dir, 'job.key');
    const planted = await generateDpopKey();
    await writeFile(path, JSON.stringify(planted), { mode: 0o600 });
    await chown(path, 4242, 4242);
    // `login` would bind its tokens to a key the other user holds.
    await expect(keyOfFile(path)).rejects.toThrow(
      `${path} belongs to another user (uid 4242), not to this one (uid ${process.getuid!()})`,
    );
    await expect(readKeyFile(path, await thumbprintOf(planted))).rejects.toThrow(
      'belongs to another user (uid 4242)',
    );
  });

  it('is named in the credentials file with its thumbprint, never with a key beside it', async () => {
    const path = join(dir, 'credentials.json');
    const login: StoredLogin = {
      gateway: 'http://localhost:8000/',
      realm: 'acme',
      username: 'alice',
      sessionId: 's-1',
      refreshToken: 'refresh-1',
      loggedInAt: '2026-11-01T00:00:00.000Z',
      keyFile: join(dir, 'job.key'),
      keyThumbprint: 'jkt',
    };
    await writeLogins(path, [login]);
    expect(await readLogins(path)).toEqual([login]);
    for (const broken of [
      { ...login, keyThumbprint: undefined },
      { ...login, dpopKey: await generateDpopKey() },
      { ...login, keyFile: undefined },
    ]) {
      await writeLogins(path, [broken]);
      await expect(readLogins(path)).rejects.toThrow('is not a realmgate credentials file');
    }
  });
});
