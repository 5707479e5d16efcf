/**
 * The segment trie the edge matches paths with, built once from the route tables'
 * declarations: one map lookup per segment, no pattern per route per request.
 */

/** What the trie stores of a declaration: the declaration itself and its `{name}`s in order. */
export interface TrieLeaf<T> {
  readonly value: T;
  readonly names: readonly string[];
}

/** A leaf serving a whole subtree, whatever the method. */
interface SubtreeLeaf<T> extends TrieLeaf<T> {
  /** True: before anything declared below it; false: only where nothing below serves the path. */
  readonly shadows: boolean;
}

interface TrieNode<T> {
  readonly literals: Map<string, TrieNode<T>>;
  /** Literals declared `caseless`, by their lower-case spelling: tried after `literals`. */
  readonly caseless: Map<string, TrieNode<T>>;
  param: { readonly name: string; readonly node: TrieNode<T> } | undefined;
  /** By upper-case method (`*`: any method): what this exact path serves. */
  readonly methods: Map<string, TrieLeaf<T>>;
  /** Serves this path and every path below it, whatever the method. */
  below: SubtreeLeaf<T> | undefined;
}

const nodeOf = <T>(): TrieNode<T> => ({
  literals: new Map(),
  caseless: new Map(),
  param: undefined,
  methods: new Map(),
  below: undefined,
});

/** The `methods` key of a leaf that serves its path whatever the method. */
export const ANY_METHOD = '*';

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

/** How a value is served at its template's path. */
export interface TrieServing {
  /** Upper- or lower-case; `*` (ANY_METHOD): this exact path, any method. Ignored for a subtree. */
  method?: string;
  /**
   * Also every path below, any method: `shadows` before anything declared below it (the
   * forwarded route), `fallback` only where nothing declared below serves the path.
   */
  subtree?: 'shadows' | 'fallback';
  /** Its literal segments match however they are cased (tried after those matched as written). */
  caseless?: boolean;
}

export interface SegmentTrie<T> {
  /**
   * Adds `value` at the template's `segments` (`{name}` a parameter), served as `serving` says.
   * Throws on a path served twice, on two names for one parameter position.
   */
  add(segments: readonly string[], serving: TrieServing, value: T): void;
  /**
   * The value serving `segments[from, n)` (HEAD finds a GET, any method one served whatever the
   * method), its parameters by name written into `params`. Literal segments win (as written,
   * then those declared caseless); a parameter is tried when the literals' branches serve
   * nothing (as express does), except at `from` itself: there a literal as written decides alone.
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

  function atPath(node: TrieNode<T>, method: string): TrieLeaf<T> | undefined {
    return (
      node.methods.get(method) ??
      (method === 'HEAD' ? node.methods.get('GET') : undefined) ??
      node.methods.get(ANY_METHOD)
    );
  }

  function walk(
    node: TrieNode<T>,
    segments: readonly string[],
    i: number,
    n: number,
    method: string,
    exclusive: boolean,
  ): TrieLeaf<T> | undefined {
    const below = node.below;
    if (below?.shadows) return below;
    if (i === n) return atPath(node, method) ?? below;
    const segment = segments[i]!;
    const literal = node.literals.get(segment);
    if (literal) {
      const found = walk(literal, segments, i + 1, n, method, false);
      if (found) return found;
    }
    // Only tables that declare caseless literals (the /auth one) pay for the lower-casing.
    if (node.caseless.size > 0) {
      const folded = node.caseless.get(segment.toLowerCase());
      const found = folded && walk(folded, segments, i + 1, n, method, false);
      if (found) return found;
    }
    if (!node.param || (literal && exclusive)) return below;
    values.push(segment);
    const found = walk(node.param.node, segments, i + 1, n, method, false);
    if (found) return found;
    values.pop();
    return below;
  }

  return {
    add(segments, serving, value) {
      const path = `/${segments.join('/')}`;
      let node = root;
      const names: string[] = [];
      for (const segment of segments) {
        const name = paramName(segment);
        if (name === undefined) {
          const literals = serving.caseless ? node.caseless : node.literals;
          const key = serving.caseless ? segment.toLowerCase() : segment;
          let next = literals.get(key);
          if (!next) literals.set(key, (next = nodeOf<T>()));
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
      const { subtree } = serving;
      const key = serving.method?.toUpperCase() ?? ANY_METHOD;
      if (subtree ? node.below : node.methods.has(key)) {
        const what = subtree ? 'any method, and below,' : key === ANY_METHOD ? 'any method' : key;
        throw new Error(`${what} ${path} is declared twice`);
      }
      if (subtree) node.below = { value, names, shadows: subtree === 'shadows' };
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
