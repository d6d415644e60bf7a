/**
 * What travels on the bus's Redis channels: one JSON object per message, carrying the format version and
 * the sending node's id.
 *
 * ```
 * {"v":2,"node":"<id>","type":"event","event":{"kind":"resource_updated","uri":"note://a/b"}}
 * {"v":2,"node":"<id>","type":"cancel","principal":"alice","id":"listen:1"}
 * ```
 *
 * Version 2 is version 1's format on the channels of interest routing. Version 1 (the first release)
 * travels on `${prefix}:bus` alone: a node of this release reads it there, and while nodes of the first
 * release share the Redis it writes a copy of each message there, in version 1, under the node id
 * `~2~<id>` ({@link LEGACY_COPY_MARK}), which first-release nodes deliver and nodes of this release skip.
 *
 * Anyone who can PUBLISH on the channel can put bytes here, so a received message is decoded strictly:
 * the version, the node id, the type, the exact set of keys, the event through the engine's own
 * `validateEvent`, and no `__proto__` key in the envelope or the event (a task's state may hold one:
 * see {@link parse}). Whatever fails is dropped, never delivered.
 */
import { isPlainObject, validateEvent, type RequestId, type SubscriptionEvent } from '../../lib/internal.ts';
import { MAX_NODE_ID_LENGTH } from './options.ts';

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

/** Why a received message was dropped. */
export type DropReason =
  'too-large' | 'not-json' | 'forbidden-key' | 'not-object' | 'version' | 'node' | 'type' | 'keys' | 'event' | 'cancel';

/** A message from another node, decoded and valid; or why it was dropped; or one of this node's own. */
export type Decoded =
  | { readonly type: 'event'; readonly event: SubscriptionEvent }
  | { readonly type: 'cancel'; readonly principal: string; readonly id: RequestId }
  | { readonly type: 'own' }
  | { readonly type: 'drop'; readonly reason: DropReason };

const EVENT_KEYS = ['v', 'node', 'type', 'event'];
const CANCEL_KEYS = ['v', 'node', 'type', 'principal', 'id'];

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

function hasExactly(object: Record<string, unknown>, keys: readonly string[]): boolean {
  const own = Object.keys(object);
  return own.length === keys.length && keys.every((key) => Object.hasOwn(object, key));
}

/** Whether `text` is over {@link MAX_MESSAGE_BYTES} in UTF-8, without measuring strings that cannot be. */
export function tooLarge(text: string): boolean {
  // A UTF-16 code unit takes at most 3 bytes in UTF-8, and at least 1.
  if (text.length > MAX_MESSAGE_BYTES) return true;
  return text.length * 3 > MAX_MESSAGE_BYTES && Buffer.byteLength(text) > MAX_MESSAGE_BYTES;
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

  constructor(private readonly nodeId: string) {
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

  /** An event message, from its {@link body}. */
  event(body: string): string {
    return `${this.eventHead}${body}}`;
  }

  /** The first release's message of an event, from its {@link body}, for the legacy channel. */
  legacyEvent(body: string): string {
    return `${this.legacyEventHead}${body}}`;
  }

  /** A cancellation message. */
  cancel(principal: string, id: RequestId): string {
    return `${this.cancelHead}${JSON.stringify(principal)},"id":${JSON.stringify(id)}}`;
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
        if (!hasExactly(message, EVENT_KEYS)) return drop('keys');
        if (protoHolders.includes(message.event as object)) return drop('forbidden-key');
        try {
          return { type: 'event', event: validateEvent(message.event) };
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
      default:
        return drop('type');
    }
  }
}

function drop(reason: DropReason): Decoded {
  return { type: 'drop', reason };
}
