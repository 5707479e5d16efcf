import { closeSync, openSync, readSync } from 'node:fs';

/** Far above any password, key or connection string: a larger file is not one of them. */
export const MAX_SETTING_FILE_BYTES = 64 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The variable that names the file a setting may be read from: `<NAME>_FILE`. */
export function fileVariableOf(name: string): string {
  return `${name}_FILE`;
}

/** Why a setting file could not be used; the text never holds the file's content. */
export class SettingFileError extends Error {}

/**
 * Reads a setting file as Docker and Kubernetes hand secrets over: the content, minus one
 * trailing newline (`\n` or `\r\n`), which editors and `echo` add. Refused: a file that cannot
 * be read, one over `MAX_SETTING_FILE_BYTES` (read no further, so `/dev/zero` cannot hang the
 * start), an empty one and one that is not UTF-8.
 */
export function readSettingFile(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw new SettingFileError(`cannot read ${path} (${codeOf(err)})`);
  }
  try {
    const buffer = Buffer.alloc(MAX_SETTING_FILE_BYTES + 1);
    let size = 0;
    for (;;) {
      let read: number;
      try {
        read = readSync(fd, buffer, size, buffer.length - size, null);
      } catch (err) {
        throw new SettingFileError(`cannot read ${path} (${codeOf(err)})`);
      }
      if (read === 0) break;
      size += read;
      if (size > MAX_SETTING_FILE_BYTES) {
        throw new SettingFileError(`${path} is larger than ${MAX_SETTING_FILE_BYTES} bytes`);
      }
    }
    let text: string;
    try {
      text = utf8.decode(buffer.subarray(0, size));
    } catch {
      throw new SettingFileError(`${path} is not UTF-8 text`);
    }
    const value = text.endsWith('\r\n')
      ? text.slice(0, -2)
      : text.endsWith('\n')
        ? text.slice(0, -1)
        : text;
    if (value === '') throw new SettingFileError(`${path} is empty`);
    return value;
  } finally {
    closeSync(fd);
  }
}

/** The error code (`ENOENT`, `EACCES`, `EISDIR`, ...): says why without quoting anything. */
function codeOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === 'string' ? code : 'unreadable';
}

/** The environment with file settings read, which names came from files, and the problems. */
export interface ResolvedSettingFiles {
  env: Record<string, string>;
  fromFile: ReadonlySet<string>;
  problems: string[];
}

/**
 * Puts the content of each `<NAME>_FILE` of `fileSettings` in place of `<NAME>` in `env`
 * (values already present: empty strings count as unset). Problems name variables and paths,
 * never values: both `<NAME>` and `<NAME>_FILE` set; a file that cannot be used; and
 * `<NAME>_FILE` for a setting of `settings` that is not read from files, which would otherwise
 * be ignored without a word.
 */
export function resolveSettingFiles(
  env: Record<string, string>,
  settings: readonly string[],
  fileSettings: readonly string[],
  read: (path: string) => string = readSettingFile,
): ResolvedSettingFiles {
  const resolved = { ...env };
  const fromFile = new Set<string>();
  const problems: string[] = [];
  const readable = new Set(fileSettings);
  for (const name of settings) {
    const variable = fileVariableOf(name);
    const path = env[variable];
    if (path === undefined) continue;
    delete resolved[variable];
    if (!readable.has(name)) {
      problems.push(
        `${variable}: ${name} is not read from a file (only ${fileSettings.join(', ')})`,
      );
      continue;
    }
    if (env[name] !== undefined) {
      problems.push(`${name}: set either ${name} or ${variable}, not both`);
      continue;
    }
    try {
      resolved[name] = read(path);
      fromFile.add(name);
    } catch (err) {
      if (!(err instanceof SettingFileError)) throw err;
      problems.push(`${variable}: ${err.message}`);
    }
  }
  return { env: resolved, fromFile, problems };
}
