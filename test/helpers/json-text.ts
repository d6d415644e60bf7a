/**
 * JSON documents as text that `JSON.stringify` cannot write, for the request fuzzer: duplicate keys,
 * keys spelled with `\u` escapes (`"\u005f_proto__"`), number literals outside what a double holds
 * (`1e999`, `-0`), nesting deeper than a recursive serializer survives, and whitespace anywhere JSON
 * allows it. A document is a tree; mutations replace, remove or add nodes at a path; `jsonText()`
 * writes it out. What a server sees is then `JSON.parse` of that text, exactly as for any client.
 * The fuzzers of the listen request (test/system/fuzz.test.ts) and of the Redis wire
 * (test/system/redis-wire-fuzz.test.ts) both mutate their documents with `mutate()`.
 */

/** A node of a JSON document. */
export type JsonNode =
  /** Any valid JSON text, written as is (a scalar, or a deep nest built as text). */
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'array'; readonly items: readonly JsonNode[] }
  | { readonly kind: 'object'; readonly entries: readonly JsonEntry[] };

/** An object member: its key, spelled plainly or entirely as `\uXXXX` escapes. */
export interface JsonEntry {
  readonly key: string;
  readonly escaped: boolean;
  readonly value: JsonNode;
}

/** The tree of a plain JSON value (keys plain, in insertion order). */
export function jsonNode(value: unknown): JsonNode {
  if (Array.isArray(value)) return { kind: 'array', items: value.map(jsonNode) };
  if (typeof value === 'object' && value !== null) {
    return {
      kind: 'object',
      entries: Object.entries(value).map(([key, v]) => ({ key, escaped: false, value: jsonNode(v) })),
    };
  }
  return { kind: 'literal', text: JSON.stringify(value) };
}

/** A literal node of valid JSON text. */
export const literal = (text: string): JsonNode => ({ kind: 'literal', text });

/** The JSON string literal of `value` spelled entirely with `\\uXXXX` escapes: the same string to `JSON.parse`, other bytes. */
export function escapedText(value: string): string {
  let text = '"';
  for (let i = 0; i < value.length; i++) text += `\\u${value.charCodeAt(i).toString(16).padStart(4, '0')}`;
  return `${text}"`;
}

/** Writes a document out; `space` goes around every token (JSON's insignificant whitespace). */
export function jsonText(node: JsonNode, space = ''): string {
  switch (node.kind) {
    case 'literal':
      return node.text;
    case 'array':
      return `[${space}${node.items.map((item) => jsonText(item, space)).join(`${space},${space}`)}${space}]`;
    case 'object':
      return `{${space}${node.entries
        .map(
          (entry) =>
            `${entry.escaped ? escapedText(entry.key) : JSON.stringify(entry.key)}${space}:${space}${jsonText(entry.value, space)}`,
        )
        .join(`${space},${space}`)}${space}}`;
  }
}

/** Every node's path (child indices from the root), the root first. */
export function paths(node: JsonNode, at: readonly number[] = []): number[][] {
  const out: number[][] = [[...at]];
  const children = node.kind === 'array' ? node.items : node.kind === 'object' ? node.entries.map((e) => e.value) : [];
  children.forEach((child, i) => out.push(...paths(child, [...at, i])));
  return out;
}

/** The node at `path`, transformed by `edit`; the rest of the tree shared. */
export function editAt(node: JsonNode, path: readonly number[], edit: (target: JsonNode) => JsonNode): JsonNode {
  if (path.length === 0) return edit(node);
  const [index, ...rest] = path as [number, ...number[]];
  if (node.kind === 'array') {
    return { kind: 'array', items: node.items.map((item, i) => (i === index ? editAt(item, rest, edit) : item)) };
  }
  if (node.kind === 'object') {
    return {
      kind: 'object',
      entries: node.entries.map((entry, i) =>
        i === index ? { ...entry, value: editAt(entry.value, rest, edit) } : entry,
      ),
    };
  }
  return node;
}

/** Edits the object entry `path` ends at (its parent must be an object; the root is left as it is). */
function editEntry(
  tree: JsonNode,
  path: readonly number[],
  edit: (entries: JsonEntry[], index: number) => void,
): JsonNode {
  if (path.length === 0) return tree;
  const index = path[path.length - 1]!;
  return editAt(tree, path.slice(0, -1), (parent) => {
    if (parent.kind !== 'object') return parent;
    const entries = [...parent.entries];
    edit(entries, index);
    return { kind: 'object', entries };
  });
}

/**
 * One edit of a document. `at` picks the node it targets ({@link target}); an `add` appends a member
 * (its key may repeat one already there), an `escape` toggles how a member's key is spelled, a
 * `duplicate` appends a copy of a member (`value` in place of the copy's, when given).
 */
export type Mutation =
  | { readonly op: 'replace'; readonly at: number; readonly value: JsonNode }
  | { readonly op: 'remove'; readonly at: number }
  | {
      readonly op: 'add';
      readonly at: number;
      readonly key: string;
      readonly escaped: boolean;
      readonly value: JsonNode;
    }
  | { readonly op: 'wrap'; readonly at: number; readonly inArray: boolean }
  | { readonly op: 'escape'; readonly at: number }
  | { readonly op: 'duplicate'; readonly at: number; readonly value: JsonNode | undefined };

/**
 * How {@link target} weighs the depths of a tree: `'even'`, each depth alike; `'deeper'`, depth d
 * d + 1 times (for a request, where an error in the envelope masks everything below it, spec §6).
 */
export type DepthWeights = 'even' | 'deeper';

/**
 * The node a mutation targets: a depth first, then a node at that depth, so that the envelope's few
 * fields are hit as often as the many entries of a long list. The root is a target only when `root`.
 */
export function target(tree: JsonNode, at: number, root: boolean, weights: DepthWeights): number[] {
  const byDepth: number[][][] = [];
  for (const path of paths(tree)) if (root || path.length > 0) (byDepth[path.length] ??= []).push(path);
  // flatMap passes over holes: the root's depth, when the root is not a target.
  const levels = byDepth.flatMap((level, depth) =>
    Array.from({ length: weights === 'deeper' ? depth + 1 : 1 }, () => level),
  );
  if (levels.length === 0) return [];
  const level = levels[at % levels.length]!;
  return level[Math.floor(at / levels.length) % level.length]!;
}

/**
 * Applies `mutation` at its target. Only members are added (or duplicated) at the root: the root
 * replaced or wrapped is a single case (not an object at all), not a share of every run.
 */
export function mutate(tree: JsonNode, mutation: Mutation, weights: DepthWeights): JsonNode {
  const path = target(tree, mutation.at, mutation.op === 'add' || mutation.op === 'duplicate', weights);
  switch (mutation.op) {
    case 'replace':
      return editAt(tree, path, () => mutation.value);
    case 'wrap':
      return editAt(tree, path, (node) =>
        mutation.inArray
          ? { kind: 'array', items: [node] }
          : { kind: 'object', entries: [{ key: 'value', escaped: false, value: node }] },
      );
    case 'remove': {
      if (path.length === 0) return tree;
      const index = path[path.length - 1]!;
      return editAt(tree, path.slice(0, -1), (parent) =>
        parent.kind === 'array'
          ? { kind: 'array', items: parent.items.filter((_, i) => i !== index) }
          : parent.kind === 'object'
            ? { kind: 'object', entries: parent.entries.filter((_, i) => i !== index) }
            : parent,
      );
    }
    case 'add':
      return editAt(tree, path, (node) =>
        node.kind === 'object'
          ? {
              kind: 'object',
              entries: [...node.entries, { key: mutation.key, escaped: mutation.escaped, value: mutation.value }],
            }
          : node,
      );
    case 'escape':
      return editEntry(tree, path, (entries, index) => {
        entries[index] = { ...entries[index]!, escaped: !entries[index]!.escaped };
      });
    case 'duplicate':
      // The key again, later in the same object: JSON.parse keeps the last.
      return editAt(tree, path, (node) => {
        if (node.kind !== 'object' || node.entries.length === 0) return node;
        const copy = node.entries[mutation.at % node.entries.length]!;
        return { kind: 'object', entries: [...node.entries, { ...copy, value: mutation.value ?? copy.value }] };
      });
  }
}
