import { createInterface } from 'node:readline';
import type { CliStdin, Prompter } from './io.ts';
import { usageError } from './errors.ts';

/**
 * Asks before `org delete` destroys an organization: `--yes` (`confirmed`) or, at a terminal,
 * the organization id typed again. Without a terminal and without `--yes` nothing is deleted,
 * so a script cannot delete by accident, nor a pipe answer for a person.
 */
export async function confirmOrganizationDeletion(
  org: string,
  confirmed: boolean,
  io: Prompter,
): Promise<void> {
  if (confirmed) return;
  if (!io.stdin.isTTY) {
    throw usageError(
      'org delete needs --yes when stdin is not a terminal; nothing was deleted',
      'org',
    );
  }
  io.stderr.write(
    `This deletes organization ${org} for good: its realm (users, sessions), workspaces and ` +
      `operations.\nType the organization id to confirm: `,
  );
  const typed = await readLine(io.stdin);
  if (typed?.trim() !== org) {
    throw usageError('not confirmed: the id typed differs; nothing was deleted', 'org');
  }
}

/** One line typed at the terminal (echoed by it), or undefined when stdin closes first. */
function readLine(stdin: CliStdin): Promise<string | undefined> {
  const lines = createInterface({ input: stdin, terminal: false });
  return new Promise<string | undefined>((resolve) => {
    lines.once('line', (line) => resolve(line));
    lines.once('close', () => resolve(undefined));
  }).finally(() => {
    lines.close();
    // A flowing stdin would keep the process alive after the command is done.
    stdin.pause();
  });
}
