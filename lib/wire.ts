/**
 * What travels between the nodes of a bus, whatever the engine (Redis pub/sub, PostgreSQL NOTIFY): one
 * JSON object per message, carrying the format version and the sending node's id.
 *
 * ```
 * {"v":2,"node":"<id>","type":"event","event":{"kind":"resource_updated","uri":"note://a/b"}}
 * {"v":2,"node":"<id>","type":"event","event":{"kind":"tools_list_changed"},"at":1764650000123,
 *  "trace":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"rojo=1"}}
 * {"v":2,"node":"<id>","type":"cancel","principal":"alice","id":"listen:1"}
 * {"v":2,"node":"<id>","type":"resync"}
 * {"v":2,"node":"<id>","type":"ref","ref":"42"}
 * ```
 *
 * `resync` (version 2 only, on the resync channel every node holds) says that the sending node could
 * not publish some changes and no longer knows which: every node tells each of its streams that every
 * key it follows may have changed.
 *
 * `ref` (version 2 only, and only on a bus that enables it: the PostgreSQL bus, whose NOTIFY payloads stop
 * short of 8,000 bytes) stands for a message stored elsewhere (its spill table), by an id of at most
 * {@link MAX_REF_LENGTH} digits: the receiver reads the message there and decodes it as if it had come itself.
 *
 * A version 2 event message may carry, after the event, the publisher's {@link EventContext}: `at`, when
 * it was published (milliseconds since the epoch, by the publisher's clock: a finite number, not
 * negative), and `trace`, the W3C trace context of the span it was published in: an object of exactly
 * `traceparent` (version `00`, lowercase hex, neither id all zeros) and, optionally, `tracestate`
 * (printable ASCII, at most {@link MAX_TRACESTATE_LENGTH} characters). Both are optional, and a reader of
 * version 2 accepts exactly these two optional keys; a message whose `at` or `trace` breaks these rules
 * is dropped like any malformed message, event and all. The writer leaves out any part a reader would
 * refuse (see {@link contextMembers}), so that the event itself always travels. Version 1 has neither key.
 *
 * Version 2 is version 1's format on the channels of interest routing. Version 1 (the first release of
 * the Redis bus) travels on the Redis bus's `${prefix}:bus` alone: a node of this release reads it there,
 * and while nodes of the first release share the Redis it writes a copy of each message there, in
 * version 1, under the node id `~2~<id>` ({@link LEGACY_COPY_MARK}), which first-release nodes deliver
 * and nodes of this release skip. Other engines never had a version 1, and use none of it.
 *
 * Anyone who can publish on the channel can put bytes here, so a received message is decoded strictly:
 * the version, the node id, the type, the exact set of keys, the event through the engine's own
 * `validateEvent`, and no `__proto__` key in the envelope or the event (a task's state may hold one:
 * see {@link parse}). Whatever fails is dropped, never delivered.
 */
import { validateEvent } from './protocol.ts';
import type { EventContext, RequestId, SubscriptionEvent } from './types.ts';
import { isPlainObject } from './validate.ts';

/** The longest node id: it travels in every message. */
export const MAX_NODE_ID_LENGTH = 200;

/** The most digits of a {@link Wire.ref}'s id (a PostgreSQL `bigint` has at most 19). */
export const MAX_REF_LENGTH = 19;

/** The format this code writes on its own channels and reads there; a message of another format is foreign. */
export const WIRE_VERSION = 2;

/** The first release's format, read and written on the legacy channel `${prefix}:bus` only. */
export const LEGACY_WIRE_VERSION = 1;

/** How the node id of a legacy copy starts: a copy written by a node of this release, skipped by the others. */
export const LEGACY_COPY_MARK = '~2~';

/**
 * The largest message sent or accepted, in bytes. Events are small; a task's state can carry its
 * result, so the bound is that of a request body (the MCP SDK's 4 MiB), not of a typical event.
 */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/** The longest `tracestate` carried or accepted, in characters: the W3C Trace Context's own bound. */
export const MAX_TRACESTATE_LENGTH = 512;

/** Why a received message was dropped. */
export type DropReason =
  | 'too-large'
  | 'not-json'
  | 'forbidden-key'
  | 'not-object'
  | 'version'
  | 'node'
  | 'type'
  | 'keys'
  | 'event'
  | 'context'
  | 'cancel'
  | 'ref';

/** A message from another node, decoded and valid; or why it was dropped; or one of this node's own. */
export type Decoded =
  | { readonly type: 'event'; readonly event: SubscriptionEvent; readonly context: EventContext | undefined }
  | { readonly type: 'cancel'; readonly principal: string; readonly id: RequestId }
  | { readonly type: 'resync' }
  | { readonly type: 'ref'; readonly ref: string }
  | { readonly type: 'own' }
  | { readonly type: 'drop'; readonly reason: DropReason };

const EVENT_KEYS = ['v', 'node', 'type', 'event'];
const CANCEL_KEYS = ['v', 'node', 'type', 'principal', 'id'];
const RESYNC_KEYS = ['v', 'node', 'type'];
const REF_KEYS = ['v', 'node', 'type', 'ref'];
const REF = new RegExp(`^[1-9]\\d{0,${MAX_REF_LENGTH - 1}}$`);

/**
 * A W3C `traceparent` of version `00`: lowercase hex, and neither the trace id nor the parent (span) id all
 * zeros, which the W3C Trace Context makes invalid. Exactly 55 characters: a version 00 header has
 * nothing after its flags.
 */
const TRACEPARENT = /^00-(?!0{32})[\da-f]{32}-(?!0{16})[\da-f]{16}-[\da-f]{2}$/;

/**
 * Printable ASCII: the characters of the W3C `tracestate` grammar but the tab of its optional whitespace
 * (which OpenTelemetry never writes); no control character, so a carried tracestate is safe in a header.
 */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function isPublishedAt(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

function isTraceparent(value: unknown): value is string {
  return typeof value === 'string' && value.length === 55 && TRACEPARENT.test(value);
}

function isTracestate(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_TRACESTATE_LENGTH && PRINTABLE_ASCII.test(value);
}

/**
 * The members a message carries of `context`, each with its leading comma (`,"at":…,"trace":{…}`), or `''`.
 * What a reader would refuse is left out rather than sent, since a reader drops the whole message for
 * it: an `at` that is no finite non-negative number, a malformed traceparent (and its tracestate with
 * it), a tracestate over the bound or not printable ASCII.
 */
function contextMembers(context: EventContext): string {
  const { publishedAt, traceparent, tracestate } = context;
  let members = '';
  // A finite number's string is its JSON.
  if (isPublishedAt(publishedAt)) members += `,"at":${publishedAt}`;
  if (isTraceparent(traceparent)) {
    // A valid traceparent holds nothing JSON escapes; a tracestate may hold `"` and `\`.
    members += isTracestate(tracestate)
      ? `,"trace":{"traceparent":"${traceparent}","tracestate":${JSON.stringify(tracestate)}}`
      : `,"trace":{"traceparent":"${traceparent}"}`;
  }
  return members;
}

/**
 * The context of a version 2 event message that has `at` or `trace` (`hasAt`, `hasTrace`), or undefined
 * when either breaks the format. Only the keys the message carried are set, as the publisher gave them.
 */
function contextOf(message: Record<string, unknown>, hasAt: boolean, hasTrace: boolean): EventContext | undefined {
  const context: { publishedAt?: number; traceparent?: string; tracestate?: string } = {};
  if (hasAt) {
    const at = message.at;
    if (!isPublishedAt(at)) return undefined;
    context.publishedAt = at;
  }
  if (hasTrace) {
    const trace = message.trace;
    if (!isPlainObject(trace)) return undefined;
    const hasState = Object.hasOwn(trace, 'tracestate');
    // Exactly traceparent, and tracestate when present: no other key (`__proto__` included).
    if (Object.keys(trace).length !== (hasState ? 2 : 1) || !Object.hasOwn(trace, 'traceparent')) return undefined;
    const { traceparent, tracestate } = trace;
    if (!isTraceparent(traceparent)) return undefined;
    context.traceparent = traceparent;
    if (hasState) {
      if (!isTracestate(tracestate)) return undefined;
      context.tracestate = tracestate;
    }
  }
  return context;
}

/**
 * Parses a message, and lists the objects in it that hold a `"__proto__"` key. `JSON.parse` keeps such
 * a key as an own data property (it never sets a prototype), so the question is only where one may be.
 *
 * In the envelope and the event object, nowhere: the format has no such key. In a task's state, yes:
 * the state is the host's own data (a stored task, a tool's JSON output) and the node that publishes it
 * delivers it to its own streams and listeners as it is, `__proto__` key and all; refusing it here
 * made the same event reach one node's clients and no other's. Nothing on the receiving path merges
 * or assigns the state: the hub reads `taskId`, writes the frame from an object-rest copy (which
 * defines the key as an own property, like `JSON.parse`) and hands host listeners the event as the
 * publishing node's listeners get it. And refusing `__proto__` alone never made a naive deep merge in
 * a listener safe: `{"constructor":{"prototype":…}}` does the same harm and was always accepted.
 *
 * The reviver also bounds nesting: it recurses, so a message nested deeper than the stack allows
 * (about 2,600 levels; `JSON.stringify`, which every node needs to write a frame, gives up near 4,100)
 * throws here and is dropped, instead of reaching a hub that could not write it.
 */
function parse(raw: string): { readonly message: unknown; readonly protoHolders: readonly object[] } {
  const protoHolders: object[] = [];
  const message: unknown = JSON.parse(raw, function (this: object, key: string, value: unknown) {
    if (key === '__proto__') protoHolders.push(this);
    return value;
  });
  return { message, protoHolders };
}

/** Whether `object` has `keys` and, besides them, only the `optional` keys the caller found on it. */
function hasExactly(object: Record<string, unknown>, keys: readonly string[], optional = 0): boolean {
  const own = Object.keys(object);
  return own.length === keys.length + optional && keys.every((key) => Object.hasOwn(object, key));
}

/** Whether `text` is over {@link MAX_MESSAGE_BYTES} in UTF-8, without measuring strings that cannot be. */
export function tooLarge(text: string): boolean {
  // A UTF-16 code unit takes at most 3 bytes in UTF-8, and at least 1.
  if (text.length > MAX_MESSAGE_BYTES) return true;
  return text.length * 3 > MAX_MESSAGE_BYTES && Buffer.byteLength(text) > MAX_MESSAGE_BYTES;
}

/** What a {@link Wire} accepts besides events, cancellations and resyncs. */
export interface WireOptions {
  /** Whether `ref` messages are decoded (the PostgreSQL bus's spill references); dropped as an unknown type otherwise. */
  readonly refs?: boolean;
}

/** Encodes and decodes the messages of one node. */
export class Wire {
  /** Everything of an event message before the event: built once, so a publish serializes the event only. */
  private readonly eventHead: string;
  private readonly cancelHead: string;
  private readonly legacyEventHead: string;
  private readonly legacyCancelHead: string;
  /** How every message of this node starts: its own messages are recognized without being parsed. */
  private readonly ownPrefix: string;
  /** How every legacy copy starts, this node's or another's of this release. */
  private readonly copyPrefix = `{"v":${LEGACY_WIRE_VERSION},"node":"${LEGACY_COPY_MARK}`;

  private readonly refs: boolean;

  constructor(
    private readonly nodeId: string,
    options: WireOptions = {},
  ) {
    this.refs = options.refs === true;
    this.ownPrefix = `{"v":${WIRE_VERSION},"node":${JSON.stringify(nodeId)},`;
    this.eventHead = `${this.ownPrefix}"type":"event","event":`;
    this.cancelHead = `${this.ownPrefix}"type":"cancel","principal":`;
    // A first-release node refuses a node id over MAX_NODE_ID_LENGTH: the copy's id is cut to fit.
    const copyId = `${LEGACY_COPY_MARK}${nodeId}`.slice(0, MAX_NODE_ID_LENGTH);
    const legacyPrefix = `{"v":${LEGACY_WIRE_VERSION},"node":${JSON.stringify(copyId)},`;
    this.legacyEventHead = `${legacyPrefix}"type":"event","event":`;
    this.legacyCancelHead = `${legacyPrefix}"type":"cancel","principal":`;
  }

  /**
   * The event as JSON, the part every message of it shares. Throws what `JSON.stringify` throws (a
   * `BigInt` or a cycle in a task's state).
   */
  body(event: SubscriptionEvent): string {
    return JSON.stringify(event);
  }

  /**
   * An event message, from its {@link body}, with what it can carry of `context` (see the format above).
   * Without a context it is the head and the body, as before contexts existed.
   */
  event(body: string, context?: EventContext): string {
    if (context === undefined) return `${this.eventHead}${body}}`;
    return `${this.eventHead}${body}${contextMembers(context)}}`;
  }

  /**
   * The first release's message of an event, from its {@link body}, for the legacy channel. It never
   * carries a context: a first-release node drops a message with a key it does not know.
   */
  legacyEvent(body: string): string {
    return `${this.legacyEventHead}${body}}`;
  }

  /** A cancellation message. */
  cancel(principal: string, id: RequestId): string {
    return `${this.cancelHead}${JSON.stringify(principal)},"id":${JSON.stringify(id)}}`;
  }

  /** A resync message: every node resyncs every key its streams follow. */
  resync(): string {
    return `${this.ownPrefix}"type":"resync"}`;
  }

  /**
   * How every `ref` message of this node starts, up to its id's opening quote: `${refHead}${id}"}` is the
   * message (a bus that learns the id in SQL, from an INSERT's `RETURNING`, completes it there).
   */
  get refHead(): string {
    return `${this.ownPrefix}"type":"ref","ref":"`;
  }

  /** A reference to a message stored elsewhere (a spill table's row), by its id: digits, no leading zero. */
  ref(id: string): string {
    return `${this.refHead}${id}"}`;
  }

  /** The first release's message of a cancellation, for the legacy channel. */
  legacyCancel(principal: string, id: RequestId): string {
    return `${this.legacyCancelHead}${JSON.stringify(principal)},"id":${JSON.stringify(id)}}`;
  }

  /**
   * Decodes a received message strictly: of {@link WIRE_VERSION} from the bus's own channels, of
   * {@link LEGACY_WIRE_VERSION} from the legacy channel (where the copies of this release's nodes are skipped).
   */
  decode(raw: string, legacy = false): Decoded {
    if (raw.startsWith(legacy ? this.copyPrefix : this.ownPrefix)) return { type: 'own' };
    if (tooLarge(raw)) return drop('too-large');
    let parsed: ReturnType<typeof parse>;
    try {
      parsed = parse(raw);
    } catch {
      return drop('not-json');
    }
    const { message, protoHolders } = parsed;
    if (!isPlainObject(message)) return drop('not-object');
    if (protoHolders.includes(message)) return drop('forbidden-key');
    if (message.v !== (legacy ? LEGACY_WIRE_VERSION : WIRE_VERSION)) return drop('version');
    const node = message.node;
    if (typeof node !== 'string' || node === '' || node.length > MAX_NODE_ID_LENGTH) return drop('node');
    // Our own id in a message that does not start as ours do: we did not write it. Dropped and counted
    // as foreign (stats().dropped is where an operator sees someone writing on the channel), not
    // ignored unseen as an echo of ours is.
    if (node === this.nodeId) return drop('node');
    switch (message.type) {
      case 'event': {
        // Version 2 may add `at` and `trace`; version 1 has exactly the four keys.
        const hasAt = !legacy && Object.hasOwn(message, 'at');
        const hasTrace = !legacy && Object.hasOwn(message, 'trace');
        const optional = (hasAt ? 1 : 0) + (hasTrace ? 1 : 0);
        if (!hasExactly(message, EVENT_KEYS, optional)) return drop('keys');
        if (protoHolders.includes(message.event as object)) return drop('forbidden-key');
        let context: EventContext | undefined;
        if (optional > 0) {
          context = contextOf(message, hasAt, hasTrace);
          if (context === undefined) return drop('context');
        }
        try {
          return { type: 'event', event: validateEvent(message.event), context };
        } catch {
          return drop('event');
        }
      }
      case 'cancel': {
        if (!hasExactly(message, CANCEL_KEYS)) return drop('keys');
        const { principal, id } = message;
        if (typeof principal !== 'string' || principal === '') return drop('cancel');
        if (typeof id !== 'string' && !(typeof id === 'number' && Number.isFinite(id))) return drop('cancel');
        return { type: 'cancel', principal, id };
      }
      case 'resync':
        if (legacy) return drop('type');
        if (!hasExactly(message, RESYNC_KEYS)) return drop('keys');
        return { type: 'resync' };
      case 'ref': {
        if (legacy || !this.refs) return drop('type');
        if (!hasExactly(message, REF_KEYS)) return drop('keys');
        const ref = message.ref;
        if (typeof ref !== 'string' || !REF.test(ref)) return drop('ref');
        return { type: 'ref', ref };
      }
      default:
        return drop('type');
    }
  }
}

function drop(reason: DropReason): Decoded {
  return { type: 'drop', reason };
}
