/**
 * What a node must do with one message that arrives on the Redis bus's channel, decided from the wire
 * format's contract (docs/redis.md, "The channel and the messages", and the header of
 * adapters/redis/wire.ts), written out independently of the bus's decoder so that the fuzzer can judge
 * every message exactly: ignore it as the node's own, drop it (counted), or hand the event or the
 * cancellation to every hub of the node. Only "is this an absolute URI" is asked of the library, as
 * listen-oracle.ts does (that rule is fuzzed on its own in test/system/fuzz.test.ts).
 *
 * Also here: which stream an accepted event or cancellation reaches, and the exact frame it writes
 * there (spec §3), so that what a client reads can be compared byte for byte.
 */
import { isAbsoluteUri } from '../../lib/internal.ts';

/** The largest message a node accepts, in UTF-8 bytes of the text it received. */
export const WIRE_LIMIT_BYTES = 4 * 1024 * 1024;
/** The longest node id, in UTF-16 code units (a JavaScript string's length). */
export const NODE_ID_MAX = 200;
/**
 * Nesting the oracle decides. A message nested at most {@link DEPTH_DECIDED} deep is judged by the
 * rules; one nested deeper than {@link DEPTH_UNWRITABLE} must be dropped, because no node can have
 * written it: `JSON.stringify` throws a RangeError long before (about 4,100 levels on Node 20), so no
 * hub could publish it nor write its frame. In between, whether a node takes it depends on the call
 * stack, and the fuzzer never sends such a message.
 */
export const DEPTH_DECIDED = 1_100;
export const DEPTH_UNWRITABLE = 10_000;

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** The notification method of each event kind (spec §3). */
export const METHODS = {
  tools_list_changed: 'notifications/tools/list_changed',
  prompts_list_changed: 'notifications/prompts/list_changed',
  resources_list_changed: 'notifications/resources/list_changed',
  resource_updated: 'notifications/resources/updated',
  task_status: 'notifications/tasks',
} as const;
export type Kind = keyof typeof METHODS;
const LIST_KINDS = ['tools_list_changed', 'prompts_list_changed', 'resources_list_changed'] as const;

/** An event as every hub of the receiving node must be handed it: its canonical form, extra fields gone. */
export type WireEvent =
  | { readonly kind: 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed' }
  | { readonly kind: 'resource_updated'; readonly uri: string }
  | { readonly kind: 'task_status'; readonly task: Record<string, unknown>; readonly owner: string };

/** Why a message must be dropped (for the figures; a drop is a drop, whatever the reason). */
export type DropWhy =
  | 'size'
  | 'json'
  | 'depth'
  | 'not-object'
  | 'prototype-key'
  | 'version'
  | 'node'
  | 'self'
  | 'type'
  | 'keys'
  | 'event'
  | 'at'
  | 'trace'
  | 'cancel';

/**
 * What a format 2 event message carries besides the event (its `at` and its `trace`), as the receiving
 * node's members must be handed it: only the fields the message had.
 */
export interface WireContext {
  readonly publishedAt?: number;
  readonly traceparent?: string;
  readonly tracestate?: string;
}

export type Verdict =
  /** The receiving node's own message, come back from Redis: neither received nor dropped. */
  | { readonly kind: 'own' }
  | { readonly kind: 'drop'; readonly why: DropWhy }
  /** `context` is undefined when the message had neither `at` nor `trace`. */
  | { readonly kind: 'event'; readonly event: WireEvent; readonly context: WireContext | undefined }
  | { readonly kind: 'cancel'; readonly principal: string; readonly id: string | number }
  | { readonly kind: 'resync' };

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const own = (object: Json, key: string): unknown => (Object.hasOwn(object, key) ? object[key] : undefined);
const sameKeys = (object: Json, keys: readonly string[]): boolean => {
  const have = Object.keys(object);
  return have.length === keys.length && keys.every((key) => have.includes(key));
};

/** How deep a parsed value nests (a scalar is 0, `[]` is 1), walked without recursion. */
export function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (typeof node !== 'object' || node === null) {
      deepest = Math.max(deepest, depth);
      continue;
    }
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** The text a client library hands the bus for these bytes: UTF-8, bad sequences replaced by U+FFFD, a BOM kept. */
export function receivedText(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
}

/**
 * Which channel a message arrives on: `'legacy'`, the first release's `${prefix}:bus` (format 1), or
 * `'current'`, one of this release's channels (format 2).
 */
export type WireChannel = 'legacy' | 'current';

/** The format version each channel carries. */
export const VERSION_OF: Record<WireChannel, number> = { legacy: 1, current: 2 };

/**
 * How every message a node writes in format `version` begins (its version, then its id, in that order,
 * without spaces): format 1 as a first-release node writes it, format 2 as a node of this release does.
 */
export function ownPrefix(nodeId: string, version = 1): string {
  return `{"v":${version},"node":${JSON.stringify(nodeId)},`;
}

/**
 * How the copies begin that nodes of this release write on the legacy channel for first-release
 * nodes: their node id starts with `~2~`. Every node of this release skips them (it hears the
 * original on its own channels), whichever node wrote them.
 */
export const LEGACY_COPY_PREFIX = '{"v":1,"node":"~2~';

/**
 * The verdict of the node `receiver` on one message, in the contract's order:
 *
 * 0. On the legacy channel (see {@link WireChannel}), a message that begins as a copy written by a node
 *    of this release ({@link LEGACY_COPY_PREFIX}) is skipped like the receiver's own.
 * 1. A message that begins exactly as the receiver's own messages begin is its own, back from Redis
 *    (Redis sends a publisher's messages to its own subscription too): ignored, neither received nor
 *    dropped. The receiver does not parse its echoes, so a forgery in exactly that form is ignored
 *    the same way, which is safe: it reaches nothing.
 * 2. Over 4 MiB (UTF-8 bytes of the received text): dropped.
 * 3. Not JSON text, or nested deeper than anyone can write (see {@link DEPTH_UNWRITABLE}): dropped.
 * 4. The envelope: an object with the channel's format version exactly (1 or 2), a node id that is a non-empty
 *    string of at most 200 characters and not the receiver's own (a message claiming the receiver's
 *    id in another form is a forgery), a `type` of `event` or `cancel` (or, in format 2 only, `resync`)
 *    with exactly that type's keys,
 *    and no `"__proto__"` key in it. Else dropped.
 * 5. An event, by the rules of `hub.publish()`: a known kind; a list change names no `uri`; an update
 *    names an absolute URI; a task event carries `task` (an object with a non-empty string `taskId`
 *    and a string `status`) and a string `owner`. The event object itself holds no `"__proto__"` key;
 *    the task's state is the host's opaque data and may (a node publishing it delivers it locally as
 *    it is, so every other node must too). Extra fields of the event are left out. Else dropped.
 *    In format 2 only, the event message may also have `at` and `trace`, and must then keep their rules
 *    (see {@link contextOf}); else the whole message is dropped.
 * 6. A cancellation: a non-empty string principal, an id that is a string or a finite number. Else dropped.
 * 7. A resync (format 2): exactly `v`, `node` and `type`; every node resyncs everything its streams follow.
 */
export function judge(bytes: Uint8Array, receiver: string, channel: WireChannel = 'legacy'): Verdict {
  const text = receivedText(bytes);
  if (text.startsWith(channel === 'legacy' ? LEGACY_COPY_PREFIX : ownPrefix(receiver, 2))) return { kind: 'own' };
  if (Buffer.byteLength(text, 'utf8') > WIRE_LIMIT_BYTES) return drop('size');
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return drop('json');
  }
  const verdict = byRules(message, receiver, VERSION_OF[channel]);
  const depth = depthOf(message);
  if (depth > DEPTH_UNWRITABLE) return drop('depth');
  if (depth > DEPTH_DECIDED && verdict.kind !== 'drop') {
    throw new Error(`the oracle does not decide a message nested ${depth} deep`);
  }
  return verdict;
}

function byRules(message: unknown, receiver: string, version: number): Verdict {
  if (!isObject(message)) return drop('not-object');
  if (Object.hasOwn(message, '__proto__')) return drop('prototype-key');
  if (own(message, 'v') !== version) return drop('version');
  const node = own(message, 'node');
  if (typeof node !== 'string' || node === '' || node.length > NODE_ID_MAX) return drop('node');
  if (node === receiver) return drop('self');
  switch (own(message, 'type')) {
    case 'event': {
      const optional = version === 2 ? ['at', 'trace'].filter((key) => Object.hasOwn(message, key)) : [];
      if (!sameKeys(message, ['v', 'node', 'type', 'event', ...optional])) return drop('keys');
      const event = eventOf(own(message, 'event'));
      if (event === undefined) return drop('event');
      if (optional.length === 0) return { kind: 'event', event, context: undefined };
      const context = contextOf(message);
      return typeof context === 'string' ? drop(context) : { kind: 'event', event, context };
    }
    case 'cancel': {
      if (!sameKeys(message, ['v', 'node', 'type', 'principal', 'id'])) return drop('keys');
      const principal = own(message, 'principal');
      const id = own(message, 'id');
      if (typeof principal !== 'string' || principal === '') return drop('cancel');
      if (!(typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)))) return drop('cancel');
      return { kind: 'cancel', principal, id };
    }
    case 'resync':
      if (version !== 2 || !sameKeys(message, ['v', 'node', 'type'])) return drop(version === 2 ? 'keys' : 'type');
      return { kind: 'resync' };
    default:
      return drop('type');
  }
}

function drop(why: DropWhy): Verdict {
  return { kind: 'drop', why };
}

/**
 * The context of a format 2 event message that has `at` or `trace`, by docs/redis.md ("The channels and
 * the messages"), or why it is refused:
 *
 * - `at`: a number, finite, not negative (milliseconds since the epoch).
 * - `trace`: an object of exactly `traceparent` and, optionally, `tracestate`. The traceparent is W3C's
 *   of version `00`: four fields joined by `-`, the version `00`, a trace id of 32 lowercase hex digits, a
 *   span id of 16, flags of 2, and neither id all zeros. The tracestate: printable ASCII (U+0020 to
 *   U+007E), at most 512 characters.
 */
function contextOf(message: Json): WireContext | 'at' | 'trace' {
  const context: { publishedAt?: number; traceparent?: string; tracestate?: string } = {};
  if (Object.hasOwn(message, 'at')) {
    const at = message.at;
    if (typeof at !== 'number' || !Number.isFinite(at) || at < 0) return 'at';
    context.publishedAt = at;
  }
  if (Object.hasOwn(message, 'trace')) {
    const trace = message.trace;
    if (!isObject(trace)) return 'trace';
    const keys = Object.hasOwn(trace, 'tracestate') ? ['traceparent', 'tracestate'] : ['traceparent'];
    if (!sameKeys(trace, keys)) return 'trace';
    const traceparent = own(trace, 'traceparent');
    if (!isTraceparent(traceparent)) return 'trace';
    context.traceparent = traceparent;
    if (keys.length === 2) {
      const tracestate = own(trace, 'tracestate');
      if (!isTracestate(tracestate)) return 'trace';
      context.tracestate = tracestate;
    }
  }
  return context;
}

const LOWER_HEX = '0123456789abcdef';

function isTraceparent(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  const fields = value.split('-');
  if (fields.length !== 4) return false;
  const [version, traceId, spanId, flags] = fields as [string, string, string, string];
  const hex = (field: string, length: number): boolean =>
    field.length === length && [...field].every((c) => LOWER_HEX.includes(c));
  return (
    version === '00' &&
    hex(traceId, 32) &&
    hex(spanId, 16) &&
    hex(flags, 2) &&
    traceId !== '0'.repeat(32) &&
    spanId !== '0'.repeat(16)
  );
}

function isTracestate(value: unknown): value is string {
  if (typeof value !== 'string' || value.length > 512) return false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code > 0x7e) return false;
  }
  return true;
}

/**
 * What a node of this release carries of the context its hub hands it, by docs/redis.md: every part a
 * reader would accept, and nothing else (an `at` that is no finite non-negative number is left out, and so
 * is a malformed traceparent with its tracestate, and a tracestate a reader would refuse). Undefined when
 * nothing is left: the message then has neither `at` nor `trace`.
 */
export function carried(context: Record<string, unknown> | undefined): WireContext | undefined {
  if (context === undefined) return undefined;
  const out: { publishedAt?: number; traceparent?: string; tracestate?: string } = {};
  const { publishedAt, traceparent, tracestate } = context;
  if (typeof publishedAt === 'number' && Number.isFinite(publishedAt) && publishedAt >= 0) {
    // As JSON writes it and a reader parses it back (-0 is written 0).
    out.publishedAt = publishedAt === 0 ? 0 : publishedAt;
  }
  if (isTraceparent(traceparent)) {
    out.traceparent = traceparent;
    if (isTracestate(tracestate)) out.tracestate = tracestate;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/**
 * The message a node of this release writes for `event` published with `context`, by the contract: the
 * envelope's members in the writer's order (docs/redis.md), then what it {@link carried} of the context.
 */
export function writtenEvent(node: string, event: WireEvent, context?: Record<string, unknown>): string {
  const kept = carried(context);
  const members: string[] = [`"type":"event"`, `"event":${JSON.stringify(event)}`];
  if (kept?.publishedAt !== undefined) members.push(`"at":${JSON.stringify(kept.publishedAt)}`);
  if (kept?.traceparent !== undefined) {
    const trace: Record<string, string> = { traceparent: kept.traceparent };
    if (kept.tracestate !== undefined) trace.tracestate = kept.tracestate;
    members.push(`"trace":${JSON.stringify(trace)}`);
  }
  return `${ownPrefix(node, 2)}${members.join(',')}}`;
}

function eventOf(event: unknown): WireEvent | undefined {
  if (!isObject(event) || Object.hasOwn(event, '__proto__')) return undefined;
  const kind = own(event, 'kind');
  if (typeof kind !== 'string' || !Object.hasOwn(METHODS, kind)) return undefined;
  if ((LIST_KINDS as readonly string[]).includes(kind)) {
    return Object.hasOwn(event, 'uri') ? undefined : ({ kind } as WireEvent);
  }
  if (kind === 'resource_updated') {
    const uri = own(event, 'uri');
    return typeof uri === 'string' && isAbsoluteUri(uri) ? { kind, uri } : undefined;
  }
  const task = own(event, 'task');
  const owner = own(event, 'owner');
  if (!isObject(task) || typeof owner !== 'string') return undefined;
  const taskId = own(task, 'taskId');
  if (typeof taskId !== 'string' || taskId === '' || typeof own(task, 'status') !== 'string') return undefined;
  return { kind: 'task_status', task, owner };
}

// ---------------------------------------------------------------------------------------------------
// Who gets what, and the bytes of it
// ---------------------------------------------------------------------------------------------------

/** A listen stream as acknowledged: its principal (undefined for an anonymous caller), its id and filter. */
export interface StreamModel {
  readonly principal: string | undefined;
  readonly id: string | number;
  readonly filter: {
    readonly toolsListChanged?: true;
    readonly promptsListChanged?: true;
    readonly resourcesListChanged?: true;
    readonly resourceSubscriptions?: readonly string[];
    readonly taskIds?: readonly string[];
  };
}

const FLAG: Record<(typeof LIST_KINDS)[number], 'toolsListChanged' | 'promptsListChanged' | 'resourcesListChanged'> = {
  tools_list_changed: 'toolsListChanged',
  prompts_list_changed: 'promptsListChanged',
  resources_list_changed: 'resourcesListChanged',
};

/**
 * Whether `event` reaches `stream`: a list change reaches the streams that asked for that list, an
 * update those that named its URI, a task event those that named its id and whose principal owns it
 * (an anonymous caller owns nothing).
 */
export function reaches(event: WireEvent, stream: StreamModel): boolean {
  switch (event.kind) {
    case 'resource_updated':
      return stream.filter.resourceSubscriptions?.includes(event.uri) ?? false;
    case 'task_status':
      return (
        stream.principal !== undefined &&
        stream.principal === event.owner &&
        (stream.filter.taskIds?.includes(event.task.taskId as string) ?? false)
      );
    default:
      return stream.filter[FLAG[event.kind]] === true;
  }
}

/**
 * Whether `stream` follows the key of `event` (its list, URI or task id, whoever owns the task): with
 * interest routing, what brings the event's channel to the stream's node.
 */
export function follows(event: WireEvent, stream: StreamModel): boolean {
  switch (event.kind) {
    case 'resource_updated':
      return stream.filter.resourceSubscriptions?.includes(event.uri) ?? false;
    case 'task_status':
      return stream.filter.taskIds?.includes(event.task.taskId as string) ?? false;
    default:
      return stream.filter[FLAG[event.kind]] === true;
  }
}

/** Whether a cancellation of `principal`'s listen `id` ends `stream`: same principal, same id of the same type. */
export function cancels(principal: string, id: string | number, stream: StreamModel): boolean {
  return stream.principal === principal && typeof stream.id === typeof id && stream.id === id;
}

/**
 * The `data` of the frame `event` writes on a stream of listen id `id`: the notification with the
 * event's fields as params (a task's whole state but its own `_meta`), then the subscription id in
 * `_meta` (spec §3), as `JSON.stringify` writes it.
 */
export function frameData(event: WireEvent, id: string | number): string {
  const meta = { _meta: { [SUBSCRIPTION_ID]: id } };
  let params: Json;
  switch (event.kind) {
    case 'resource_updated':
      params = { uri: event.uri, ...meta };
      break;
    case 'task_status': {
      // Spreading copies every own key as an own property, `__proto__` included.
      const state: Json = { ...event.task };
      delete state._meta;
      params = { ...state, ...meta };
      break;
    }
    default:
      params = meta;
  }
  return JSON.stringify({ jsonrpc: '2.0', method: METHODS[event.kind], params });
}

/**
 * An event as a hub listener receives it, in one string: its keys, and each field as JSON (a task's
 * state as `JSON.stringify` writes it, so an own `__proto__` key counts like any other).
 */
export function listenerView(event: object): string {
  const fields = event as Json;
  return JSON.stringify(
    Object.keys(fields)
      .sort()
      .map((key) => [key, JSON.stringify(fields[key])]),
  );
}
