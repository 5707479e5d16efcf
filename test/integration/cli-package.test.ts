import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packCli, type CliPack } from '../../packages/cli/build.ts';
import { buildSea } from '../../packages/cli/sea.ts';
import { callApi } from '../helpers/api.ts';
import { createUser } from '../helpers/keycloak.ts';
import { node20Bin, node24Bin, runProcess } from '../helpers/node-binaries.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * The CLI as API clients get it: built and packed from this checkout, installed from the
 * tarball alone (offline, empty npm cache) into a fresh prefix, and run by the machine's Node 20
 * and by Node 24 against the real gateway and Keycloak; and the single executable file, run
 * where no Node is on PATH.
 */

const repository = fileURLToPath(new URL('../..', import.meta.url));
let work: string;
let pack: CliPack;
let org: string;
const nodes: Record<'20' | '24', string> = { '20': '', '24': '' };

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'realmgate-cli-package-'));
  nodes['24'] = await node24Bin();
  nodes['20'] = await node20Bin(nodes['24']);
  pack = await packCli(work, cleanEnv(nodes['24'], work));
  org = await createOrganization(['ws1']);
});

afterAll(async () => {
  await closeTestDb();
  await rm(work, { recursive: true, force: true });
});

/**
 * A bare environment: `node` of the version under test first on PATH (it runs npm and the
 * installed command's `#!/usr/bin/env node`), a home of its own, none of `npm test`'s
 * npm_* settings.
 */
function cleanEnv(nodeBin: string, home: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { PATH: `${nodeBin}${path.delimiter}${process.env.PATH ?? ''}`, HOME: home, ...extra };
}

async function manifestOf(file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path.join(repository, file), 'utf8')) as Record<string, unknown>;
}

describe('the realmgate-cli package', () => {
  it('holds the bundle and nothing of the gateway beyond what the CLI uses', async () => {
    expect(pack.files).toEqual([
      'README.md',
      'dist/LICENSE.jose.md',
      'dist/LICENSE.oauth4webapi.md',
      'dist/LICENSE.openid-client.md',
      'dist/realmgate.js',
      'package.json',
    ]);
    // src/cli, small modules of the gateway it shares rules with (the audit log's chain,
    // checkpoints and export reader: `realmgate audit verify`; its filters' values: `audit
    // list|export`), jose's JWT decoding and JWS verification,
    // openid-client's grants (with oauth4webapi, which it is built on).
    const shared = [
      'src/envelope/envelope.ts',
      'src/tenancy/identifiers.ts',
      'src/platform/page-bounds.ts',
      'src/release/version.ts',
      'src/audit/audit-chain.ts',
      'src/audit/audit-filter-values.ts',
      'src/audit/audit-checkpoints.ts',
      'src/audit/export-verifier.ts',
    ];
    const foreign = pack.inputs.filter(
      (file) =>
        !file.startsWith('src/cli/') &&
        !file.startsWith('node_modules/jose/') &&
        !file.startsWith('node_modules/openid-client/') &&
        !file.startsWith('node_modules/oauth4webapi/') &&
        !shared.includes(file) &&
        // The version, and nothing else of the manifest (packages/cli/build.ts).
        file !== 'package.json',
    );
    expect(foreign).toEqual([]);
    expect(pack.size).toBeLessThan(100_000);
    const gateway = await manifestOf('package.json');
    // Released together under the root's version, which packages/cli/package.json does not
    // repeat: `realmgate --version` from the package or the checkout says the same.
    const manifest = pack.manifest;
    expect(manifest).toMatchObject({
      bin: { realmgate: 'dist/realmgate.js' },
      engines: { node: '>=20' },
      version: gateway.version,
    });
    expect(manifest).not.toHaveProperty('dependencies');
  });

  describe.each([
    { how: 'installed with npm i -g on Node 20', node: '20' as const },
    { how: 'installed with npm i -g on Node 24', node: '24' as const },
    { how: 'as one executable file, with no Node on PATH', node: undefined },
  ])('$how', ({ node }) => {
    let command: string;
    let env: NodeJS.ProcessEnv;

    beforeAll(async () => {
      const home = path.join(work, node === undefined ? 'sea' : `node${node}`);
      await mkdir(path.join(home, 'bin'), { recursive: true });
      const settings = {
        REALMGATE_URL: testEnv().publicUrl,
        REALMGATE_CONFIG_DIR: path.join(home, 'config'),
      };
      if (node === undefined) {
        command = await buildSea(home);
        // An empty folder as PATH: no node anywhere the executable could reach for one.
        env = { PATH: path.join(home, 'bin'), HOME: home, ...settings };
        return;
      }
      env = cleanEnv(nodes[node], home, settings);
      const prefix = path.join(home, 'prefix');
      command = path.join(prefix, 'bin', 'realmgate');
      // An empty cache and --offline: whatever the package needs must be in the tarball.
      const install = await runProcess(
        'npm',
        [
          'install',
          '--global',
          '--prefix',
          prefix,
          '--offline',
          '--cache',
          path.join(home, 'cache'),
          '--no-audit',
          '--no-fund',
          pack.tarball,
        ],
        { env, cwd: home },
      );
      expect(install, install.stderr).toMatchObject({ code: 0 });
    });

    const realmgate = (args: string[], input?: string) => runProcess(command, args, { env, input });

    it(`runs on ${node === undefined ? 'the Node inside it' : `Node ${node}`}`, async () => {
      if (node !== undefined) {
        const version = await runProcess('node', ['--version'], { env });
        expect(version.stdout).toMatch(new RegExp(`^v${node}\\.`));
      }
      const help = await realmgate(['--help']);
      expect(help).toMatchObject({ code: 0, stderr: '' });
      expect(help.stdout).toContain('Usage: realmgate <command> [options]');
      expect(help.stdout).toMatch(/^ {2}realmgate tokens revoke <id\|name> \| --all/m);
      const version = await realmgate(['--version']);
      expect(version).toEqual({
        code: 0,
        stdout: `${String((await manifestOf('package.json')).version)}\n`,
        stderr: '',
      });
    });

    it('logs in bound, prints a token and its proof the gateway takes, lists the refresh token and logs out', async () => {
      const user = await createUser(org, { workspaceRoles: ['ws1'] });
      const login = await realmgate(
        ['login', org, user.username, '--password-stdin'],
        `${user.password}\n`,
      );
      expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
      const session = JSON.parse(login.stdout) as Record<string, unknown>;
      // Bound to a key the bundle made and signs with (WebCrypto through jose, on this Node).
      expect(session).toMatchObject({
        realm: org,
        username: user.username,
        dpop_jkt: expect.any(String) as string,
      });
      const file = await stat(String(session.credentials_file));
      expect(file.mode & 0o777).toBe(0o600);

      const token = await realmgate(['token']);
      expect(token).toMatchObject({ code: 0, stderr: '' });
      const path = `/api/${org}/platform/workspaces`;
      const proof = await realmgate(['proof', 'GET', `${testEnv().publicUrl}${path}`]);
      expect(proof).toMatchObject({ code: 0, stderr: '' });
      const workspaces = await callApi(path, `DPoP ${token.stdout.trim()}`, {
        headers: { dpop: proof.stdout.trim() },
      });
      expect(workspaces.status).toBe(200);

      const tokens = await realmgate(['tokens', 'list']);
      expect(tokens).toMatchObject({ code: 0, stderr: '' });
      const ids = (JSON.parse(tokens.stdout) as Array<{ id: string }>).map((t) => t.id);
      expect(ids).toEqual([session.session_id]);

      const logout = await realmgate(['logout']);
      expect(logout).toMatchObject({ code: 0, stdout: '' });
      expect(logout.stderr).toContain(`realmgate: logged out ${user.username} (realm ${org})`);
      const after = await realmgate(['token']);
      expect(after.code).toBe(2);
      expect(after.stderr).toContain('no stored login');
      for (const output of [login, token, tokens, logout, after]) {
        expect(output.stdout + output.stderr).not.toContain(user.password);
      }
    });
  });
});
