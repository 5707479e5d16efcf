import { execFileSync } from 'node:child_process';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';
import { VERSION } from './version.ts';

/** What was built and what runs it: the start log line and `realmgate_build_info` show it. */
export interface BuildInfo {
  version: string;
  /** The git commit the code came from, or `unknown`. */
  revision: string;
  /** The Node.js version running it, without the `v`. */
  nodeVersion: string;
}

/** The variable that names the commit in an image (the Dockerfile sets it from its build arg). */
export const REVISION_VARIABLE = 'REALMGATE_REVISION';

/** A commit id, abbreviated or whole (SHA-1 or SHA-256). */
const REVISION_FORMAT = /^[0-9a-f]{7,64}$/;
/** Where this code runs from: a checkout, or the image's /app. */
const CODE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let ownRevision: string | undefined;

/**
 * The build's facts, the revision as `readRevision` finds it for this code (asked of git once
 * per process).
 */
export function buildInfo(env: Record<string, string | undefined> = process.env): BuildInfo {
  ownRevision ??= readRevision(env, CODE_ROOT);
  return { version: VERSION, revision: ownRevision, nodeVersion: process.versions.node };
}

/**
 * The commit the code in `codeRoot` came from, in order: `REALMGATE_REVISION` when it is a
 * commit id (images are built with it: they hold no `.git`); the commit checked out there
 * (`git rev-parse HEAD`); otherwise `unknown` (no git on the machine, or not a checkout).
 */
export function readRevision(env: Record<string, string | undefined>, codeRoot: string): string {
  const given = env[REVISION_VARIABLE]?.trim().toLowerCase();
  if (given && REVISION_FORMAT.test(given)) return given;
  return gitHead(codeRoot);
}

function gitHead(cwd: string): string {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
    }).trim();
    return REVISION_FORMAT.test(head) ? head : 'unknown';
  } catch {
    // No git on the machine (the image), or not a checkout.
    return 'unknown';
  }
}
