/**
 * The segment trie the edge matches `/api` paths with, built once from the route tables'
 * declarations: one map lookup per segment, no pattern per route per request.
 */

/** What the trie stores of a declaration: the declaration itself and its `{name}`s in order. */
export interface TrieLeaf<T> {
  readonly value: T;
  readonly names: readonly string[];
}

interface TrieNode<T> {
  readonly literals: Map<string, TrieNode<T>>;
  param: { readonly name: string; readonly node: TrieNode<T> } | undefined;
  /** By upper-case method: what this exact path serves. */
  readonly methods: Map<string, TrieLeaf<T>>;
  /** Serves this path and every path below it, whatever the method. */
  below: TrieLeaf<T> | undefined;
}

const nodeOf = <T>(): TrieNode<T> => ({
  literals: new Map(),
  param: undefined,
  methods: new Map(),
  below: undefined,
});

/** `{name}` → name; anything else is a literal segment. */
function paramName(segment: string): string | undefined {
  return segment.startsWith('{') && segment.endsWith('}') ? segment.slice(1, -1) : undefined;
}

/** A path template's segments: `/a/{b}/c/` → `['a', '{b}', 'c']` (a trailing slash counts not). */
export function templateSegments(path: string): string[] {
  const segments = path.slice(1).split('/');
  if (segments.length > 1 && segments[segments.length - 1] === '') segments.pop();
  return segments;
}

export interface SegmentTrie<T> {
  /**
   * Adds `value` at the template's `segments` (`{name}` a parameter); `method` undefined: there
   * and below, any method. Throws on a path served twice, on two names for one parameter position.
   */
  add(segments: readonly string[], method: string | undefined, value: T): void;
  /**
   * The value serving `segments[from, n)` (HEAD finds a GET), its parameters by name written
   * into `params`. Literal segments win; a parameter is tried when the literal's branch serves
   * nothing (as express does), except at `from` itself: there a literal decides alone.
   */
  find(
    segments: readonly string[],
    from: number,
    n: number,
    method: string,
    params: Record<string, string>,
  ): T | undefined;
}

export function createSegmentTrie<T>(): SegmentTrie<T> {
  const root = nodeOf<T>();
  const values: string[] = [];

  function walk(
    node: TrieNode<T>,
    segments: readonly string[],
    i: number,
    n: number,
    method: string,
    exclusive: boolean,
  ): TrieLeaf<T> | undefined {
    if (node.below) return node.below;
    if (i === n)
      return node.methods.get(method) ?? (method === 'HEAD' ? node.methods.get('GET') : undefined);
    const segment = segments[i]!;
    const literal = node.literals.get(segment);
    if (literal) {
      const found = walk(literal, segments, i + 1, n, method, false);
      if (found || exclusive) return found;
    }
    if (!node.param) return undefined;
    values.push(segment);
    const found = walk(node.param.node, segments, i + 1, n, method, false);
    if (!found) values.pop();
    return found;
  }

  return {
    add(segments, method, value) {
      const path = `/${segments.join('/')}`;
      let node = root;
      const names: string[] = [];
      for (const segment of segments) {
        const name = paramName(segment);
        if (name === undefined) {
          let next = node.literals.get(segment);
          if (!next) node.literals.set(segment, (next = nodeOf<T>()));
          node = next;
          continue;
        }
        if (node.param && node.param.name !== name) {
          throw new Error(`${path}: {${name}} where another path has {${node.param.name}}`);
        }
        node.param ??= { name, node: nodeOf<T>() };
        names.push(name);
        node = node.param.node;
      }
      const key = method?.toUpperCase();
      if (key === undefined ? node.below : node.methods.has(key)) {
        throw new Error(`${method ?? 'any method'} ${path} is declared twice`);
      }
      if (key === undefined) node.below = { value, names };
      else node.methods.set(key, { value, names });
    },
    find(segments, from, n, method, params) {
      values.length = 0;
      const leaf = walk(root, segments, from, n, method, true);
      if (!leaf) return undefined;
      for (let i = 0; i < leaf.names.length; i++) params[leaf.names[i]!] = values[i]!;
      return leaf.value;
    },
  };
}
