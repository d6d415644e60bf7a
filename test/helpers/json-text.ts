/**
 * JSON documents as text that `JSON.stringify` cannot write, for the request fuzzer: duplicate keys,
 * keys spelled with `\u` escapes (`"\u005f_proto__"`), number literals outside what a double holds
 * (`1e999`, `-0`), nesting deeper than a recursive serializer survives, and whitespace anywhere JSON
 * allows it. A document is a tree; mutations replace, remove or add nodes at a path; `jsonText()`
 * writes it out. What a server sees is then `JSON.parse` of that text, exactly as for any client.
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

function escapedKey(key: string): string {
  let text = '"';
  for (let i = 0; i < key.length; i++) text += `\\u${key.charCodeAt(i).toString(16).padStart(4, '0')}`;
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
            `${entry.escaped ? escapedKey(entry.key) : JSON.stringify(entry.key)}${space}:${space}${jsonText(entry.value, space)}`,
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
