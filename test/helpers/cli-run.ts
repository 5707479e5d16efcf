import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { StoredLogin } from '../../src/cli/credentials.ts';
import { runCli } from '../../src/cli/main.ts';
import { capturingIo, piped } from './cli-io.ts';
import { testEnv } from './test-env.ts';

/**
 * The CLI run in-process against the test gateway, its credentials file under the `configDir`
 * a test names. What it prints must hold none of `secrets`: the passwords a test adds, and every
 * refresh token and DPoP key `storedLogins` has read. `loginFlags` go after each `login`.
 */
export function cliOfTestGateway(secrets: Set<string>, loginFlags: string[] = []) {
  async function realmgate(
    argv: string[],
    configDir: string,
    stdin = '',
    env: Record<string, string> = {},
  ) {
    const { io, output } = capturingIo(piped(stdin));
    const code = await runCli(
      argv[0] === 'login' ? [...argv, ...loginFlags] : argv,
      { REALMGATE_URL: testEnv().publicUrl, REALMGATE_CONFIG_DIR: configDir, ...env },
      io,
    );
    const { stdout, stderr } = output;
    for (const secret of secrets) expect(stdout + stderr).not.toContain(secret);
    return { code, stdout, stderr };
  }

  /** The logins of the credentials file; what they hold becomes secret. */
  async function storedLogins(configDir: string): Promise<StoredLogin[]> {
    const file = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')) as {
      logins: StoredLogin[];
    };
    for (const login of file.logins) {
      secrets.add(login.refreshToken);
      if (login.dpopKey) secrets.add(login.dpopKey.d);
    }
    return file.logins;
  }

  return { realmgate, storedLogins };
}
