import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The parts of V8's `.cpuprofile` format (written by `node --cpu-prof`) used here. */
interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  /** Microseconds on the monotonic clock (the one `process.hrtime` reads). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

interface Bucket {
  name: string;
  micros: number;
}

/**
 * Self time by function and by package of a CPU profile: where the process itself spent its
 * time (callees excluded). Percentages are of busy time (`(idle)` excluded). With `fromMicros`
 * (monotonic clock), samples taken before that moment are left out.
 */
export async function summariseProfile(
  file: string,
  options: { fromMicros?: number | undefined; top?: number } = {},
): Promise<string> {
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const from = options.fromMicros ?? -Infinity;
  // A sample lasts until the next one: sample i is weighted by timeDeltas[i + 1].
  const stamps: number[] = [];
  let at = profile.startTime;
  for (const delta of profile.timeDeltas) stamps.push((at += delta));
  const skipped = stamps.filter((t) => t < from).length;
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parents.set(child, node.id);
  const byFunction = new Map<string, Bucket>();
  const byPackage = new Map<string, Bucket>();
  const underPackage = new Map<string, Bucket>();
  const underOwnCode = new Map<string, Bucket>();
  let total = 0;
  let idle = 0;
  profile.samples.forEach((id, i) => {
    const micros = profile.timeDeltas[i + 1] ?? 0;
    const frame = frames.get(id);
    if (!frame || stamps[i]! < from) return;
    total += micros;
    if (frame.functionName === '(idle)') {
      idle += micros;
      return;
    }
    add(byFunction, functionLabel(frame), micros);
    add(byPackage, packageOf(frame), micros);
    // Inclusive: each package, and each realmgate function, on this sample's stack counts once.
    const packages = new Set<string>();
    const own = new Set<string>();
    for (let node: number | undefined = id; node !== undefined; node = parents.get(node)) {
      const f = frames.get(node);
      if (!f?.url) continue;
      packages.add(packageOf(f));
      if (packageOf(f) === 'realmgate src/') own.add(functionLabel(f));
    }
    packages.delete('node internals (node:*)');
    for (const name of packages) add(underPackage, name, micros);
    for (const name of own) add(underOwnCode, name, micros);
  });
  const busy = total - idle;
  const table = (title: string, buckets: Map<string, Bucket>, n: number, unit = 'self ms') => [
    `| ${title} | ${unit} | % of busy |`,
    '|---|---:|---:|',
    ...[...buckets.values()]
      .sort((a, b) => b.micros - a.micros)
      .slice(0, n)
      .map(
        (b) =>
          `| ${b.name.replace(/\|/g, '\\|')} | ${(b.micros / 1000).toFixed(0)} | ${((100 * b.micros) / busy).toFixed(1)} |`,
      ),
  ];
  const scope =
    skipped > 0 ? ` (after start-up; ${skipped} earlier samples left out)` : ' (whole process)';
  return [
    `profile ${path.basename(file)}${scope}: ${(total / 1e6).toFixed(1)} s sampled, ` +
      `${((100 * busy) / total).toFixed(0)}% busy (${(busy / 1e6).toFixed(1)} s)`,
    '',
    ...table('package / area (self time)', byPackage, 12),
    '',
    ...table('function (self time)', byFunction, options.top ?? 15),
    '',
    ...table('package on the stack (inclusive time)', underPackage, 12, 'incl. ms'),
    '',
    ...table('realmgate function on the stack (inclusive time)', underOwnCode, 10, 'incl. ms'),
  ].join('\n');
}

function add(map: Map<string, Bucket>, name: string, micros: number): void {
  const bucket = map.get(name) ?? { name, micros: 0 };
  bucket.micros += micros;
  map.set(name, bucket);
}

function functionLabel(frame: CpuProfile['nodes'][number]['callFrame']): string {
  const name = frame.functionName || '(anonymous)';
  if (!frame.url) return name;
  // Lines of src/ files are those of tsx's transpiled output, so only the file is named.
  if (packageOf(frame) === 'realmgate src/') return `${name} ${shortUrl(frame.url)}`;
  return `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) return url.slice(modules + '/node_modules/'.length);
  const src = url.lastIndexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  return url.replace(/^file:\/\//, '');
}

/** node_modules package, `node:` internals, realmgate's src, or V8/native/GC. */
function packageOf(frame: CpuProfile['nodes'][number]['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native / V8 builtins)';
  if (url.startsWith('node:')) return 'node internals (node:*)';
  const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (match) return match[1]!;
  if (url.includes('/src/')) return 'realmgate src/';
  if (url.includes('/bench/')) return 'bench/';
  return url;
}

// `tsx bench/profile-summary.ts <file.cpuprofile>` prints the summary of any profile.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: tsx bench/profile-summary.ts <file.cpuprofile> [from-micros]');
  const from = process.argv[3] ? Number(process.argv[3]) : undefined;
  console.log(await summariseProfile(file, { fromMicros: from }));
}
