import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { runCli } from '../../src/cli/main.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { writeRequests } from '../helpers/audit-writes.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { listenLocally } from '../helpers/local-server.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

interface Listed {
  total: number;
  records: AuditRecord[];
  next: number | null;
}

/**
 * `realmgate audit list` and `audit export` against the real gateway: the API's filters, keyset
 * pages both ways, a table or JSON, an export streamed to a file that `audit verify` checks;
 * as a platform administrator, or as the organization's own reader through a stored login.
 */
describe('realmgate audit list|export', () => {
  let org: string;
  let admin: Record<string, string>;
  let reader: TestUser;
  let member: TestUser;
  let dir: string;

  async function realmgate(argv: string[], env: Record<string, string> = {}, stdin = '') {
    const { io, output } = capturingIo(piped(stdin));
    const code = await runCli(
      argv,
      { REALMGATE_URL: testEnv().publicUrl, REALMGATE_CONFIG_DIR: join(dir, 'config'), ...env },
      io,
    );
    return { code, ...output };
  }

  const listed = (stdout: string) => JSON.parse(stdout) as Listed;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'realmgate-cli-audit-'));
    org = await createOrganization(['ws1']);
    const administrator = await createUser('master');
    admin = {
      REALMGATE_USERNAME: administrator.username,
      REALMGATE_PASSWORD: administrator.password,
    };
    [reader, member] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(org, { workspaceRoles: ['ws1'] }),
    ]);
    await grantReaderRole(reader);
    for (let i = 0; i < 3; i++) {
      expect((await callApi(`/api/${org}/platform/workspaces`, basicAuth(member))).status).toBe(
        200,
      );
    }
  });

  /** Waits until the member's three calls are in the log (written off the request path). */
  async function memberCallsRecorded(): Promise<void> {
    await expect
      .poll(async () => {
        const page = await callApi(
          `/api/${org}/platform/audit-log?actor=${member.username}`,
          basicAuth(reader),
        );
        return (page.body.data as Listed).total;
      }, EVENTUALLY)
      .toBe(3);
  }

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await closeTestDb();
  });

  it("lists an organization's records as an administrator: newest first, oldest first, a table", async () => {
    await memberCallsRecorded();
    const newest = await realmgate(
      ['audit', 'list', org, '--actor', member.username, '--json'],
      admin,
    );
    expect(newest).toMatchObject({ code: 0, stderr: '' });
    const seqs = listed(newest.stdout).records.map((r) => r.seq);
    expect(listed(newest.stdout)).toMatchObject({ total: 3, next: null });
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a));

    const oldest = await realmgate(
      ['audit', 'list', org, '--actor', member.username, '--order', 'asc', '--max', '2', '--json'],
      admin,
    );
    expect(listed(oldest.stdout).records.map((r) => r.seq)).toEqual(
      [...seqs].reverse().slice(0, 2),
    );
    expect(listed(oldest.stdout).next).toBe(seqs[1]);

    const table = await realmgate(
      [
        'audit',
        'list',
        org,
        '--actor',
        member.username,
        '--action',
        'api.*',
        '--outcome',
        'success',
        '--all',
      ],
      admin,
    );
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^SEQ +AT +ACTION +OUTCOME +ACTOR/);
    expect(
      lines
        .slice(1, 4)
        .every((line) => line.includes(`api.request`) && line.includes(member.username)),
    ).toBe(true);
    expect(lines.at(-1)).toBe('3 of 3 records');
  });

  it('pages through a log longer than a page, keyset by keyset, both ways', async () => {
    const big = await createOrganization([]);
    await writeRequests(big, 2500);
    // The written requests only: each listing's reads are recorded in this log too.
    for (const order of ['desc', 'asc']) {
      const all = await realmgate(
        ['audit', 'list', big, '--action', 'api.request', '--all', '--order', order, '--json'],
        admin,
      );
      expect(listed(all.stdout)).toMatchObject({ total: 2500, next: null });
      const seqs = listed(all.stdout).records.map((r) => r.seq);
      expect(seqs).toHaveLength(2500);
      const sorted = Array.from({ length: 2500 }, (_, i) => i + 1);
      expect(seqs).toEqual(order === 'asc' ? sorted : sorted.reverse());
    }
  }, 120_000);

  it('stops quietly when its reader stops reading (| head): exit 141, no stack trace', async () => {
    const big = await createOrganization([]);
    // Far more than a pipe holds: the listing is still writing when the reader goes.
    await writeRequests(big, 1500);
    const child = spawn(
      'node',
      [join(import.meta.dirname, '../../src/cli/bin.ts'), 'audit', 'list', big, '--all'],
      {
        env: {
          ...process.env,
          ...admin,
          REALMGATE_URL: testEnv().publicUrl,
          REALMGATE_CONFIG_DIR: join(dir, 'config'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    // `head -n 3`: three lines, then the pipe closes.
    let read = '';
    for await (const chunk of child.stdout) {
      read += (chunk as Buffer).toString();
      if (read.split('\n').length > 3) break;
    }
    child.stdout.destroy();
    const [code] = await exited;
    expect(read).toMatch(/^SEQ +AT +ACTION/);
    expect({ code, stderr }).toEqual({ code: 141, stderr: '' });
  }, 60_000);

  it('exports to a file as it is read, which audit verify checks; CSV too', async () => {
    await memberCallsRecorded();
    const file = join(dir, 'acme.jsonl');
    const exported = await realmgate(['audit', 'export', org, '--out', file], admin);
    expect(exported.code).toBe(0);
    const summary = JSON.parse(exported.stdout) as { file: string; format: string; bytes: number };
    const text = await readFile(file, 'utf8');
    expect(summary).toEqual({ file, format: 'jsonl', bytes: Buffer.byteLength(text) });
    expect(text.split('\n').filter(Boolean).length).toBeGreaterThanOrEqual(3);
    const verified = await realmgate(['audit', 'verify', file]);
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ org, firstSeq: 1 });

    const csv = join(dir, 'failures.csv');
    const refused = await realmgate(
      ['audit', 'export', org, '--format', 'csv', '--outcome', 'failure', '--out', csv],
      admin,
    );
    expect(refused.code).toBe(0);
    expect(await readFile(csv, 'utf8')).toMatch(/^org,seq,at,action,outcome,/);
    // A file that is there is replaced once the new one is whole.
    const again = await realmgate(['audit', 'export', org, '--format', 'csv', '--out', csv], admin);
    expect(again.code).toBe(0);
    expect((await readFile(csv, 'utf8')).split('\r\n').filter(Boolean).length).toBeGreaterThan(3);
  });

  it('says an export the connection cut midway was cut (exit 3), and keeps no file', async () => {
    await memberCallsRecorded();
    // Between the CLI and the real gateway: a relay that passes the answer's first bytes (the
    // head and the start of the body), then drops both connections, as a failing network would.
    const gateway = new URL(testEnv().publicUrl);
    const relay = net.createServer((client) => {
      const upstream = net.connect(Number(gateway.port), gateway.hostname);
      let passed = 0;
      client.pipe(upstream);
      upstream.on('data', (chunk: Buffer) => {
        const room = 600 - passed;
        passed += chunk.length;
        client.write(chunk.subarray(0, Math.max(room, 0)));
        if (passed >= 600) {
          upstream.destroy();
          client.destroy();
        }
      });
      for (const socket of [client, upstream]) socket.on('error', () => undefined);
    });
    const relayUrl = await listenLocally(relay);
    try {
      const file = join(dir, 'cut.jsonl');
      const whole = await realmgate(
        ['audit', 'export', org, '--out', join(dir, 'whole.jsonl')],
        admin,
      );
      expect(whole.code).toBe(0);
      // The export is longer than what the relay lets through.
      expect((JSON.parse(whole.stdout) as { bytes: number }).bytes).toBeGreaterThan(600);
      const cut = await realmgate(['audit', 'export', org, '--out', file], {
        ...admin,
        REALMGATE_URL: relayUrl,
      });
      expect(cut.code).toBe(3);
      expect(cut.stderr).toMatch(
        new RegExp(
          `^realmgate: the export from ${relayUrl}/ was cut off after \\d+ bytes \\(.+\\); ` +
            `nothing was written to ${file}: run it again\n$`,
        ),
      );
      expect(await readdir(dir)).not.toEqual(expect.arrayContaining(['cut.jsonl']));
      expect(await readdir(dir)).not.toEqual(expect.arrayContaining(['cut.jsonl.part']));
      // OCSF comes as JSON Lines too: taken as the format asked for.
      const ocsf = join(dir, 'acme.ocsf.jsonl');
      const events = await realmgate(
        ['audit', 'export', org, '--format', 'ocsf', '--out', ocsf],
        admin,
      );
      expect(events.code).toBe(0);
    } finally {
      relay.close();
    }
  });

  it("reads through the organization's own stored login, refused without the role", async () => {
    await memberCallsRecorded();
    const asReader = { REALMGATE_CONFIG_DIR: join(dir, 'reader') };
    expect(
      (
        await realmgate(
          ['login', org, reader.username, '--password-stdin'],
          asReader,
          reader.password,
        )
      ).code,
    ).toBe(0);
    const own = await realmgate(
      ['audit', 'list', org, '--actor', member.username, '--json'],
      asReader,
    );
    expect(own.code).toBe(0);
    expect(listed(own.stdout).total).toBe(3);
    // Recorded as this reader's read of its own organization's log.
    await expect
      .poll(async () => {
        const page = await callApi(
          `/api/${org}/platform/audit-log?action=audit_log.read&actor=${reader.username}`,
          basicAuth(reader),
        );
        return (page.body.data as Listed).total;
      }, EVENTUALLY)
      .toBeGreaterThanOrEqual(1);

    const asMember = { REALMGATE_CONFIG_DIR: join(dir, 'member') };
    await realmgate(['login', org, member.username, '--password-stdin'], asMember, member.password);
    const denied = await realmgate(['audit', 'list', org], asMember);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('403-00001');
  });

  it('refuses bad filters before calling the gateway (usage, exit status 2)', async () => {
    for (const argv of [
      ['audit', 'list', org, '--outcome', 'maybe'],
      ['audit', 'list', org, '--credential', 'kerberos'],
      ['audit', 'list', org, '--from', 'yesterday'],
      ['audit', 'list', org, '--max', '0'],
      ['audit', 'list', org, '--max', '5', '--all'],
      ['audit', 'list', org, '--order', 'sideways'],
      ['audit', 'list', 'Not An Org'],
      ['audit', 'export', org],
      ['audit', 'export', org, '--format', 'xml', '--out', join(dir, 'x')],
    ]) {
      const refused = await realmgate(argv, admin);
      expect(refused.code, argv.join(' ')).toBe(2);
      expect(refused.stderr).toMatch(/^realmgate: /);
    }
  });
});
