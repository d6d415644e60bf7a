/**
 * What travels on the bus's Redis channel: one JSON object per message, carrying the format version and
 * the sending node's id.
 *
 * ```
 * {"v":1,"node":"<id>","type":"event","event":{"kind":"resource_updated","uri":"note://a/b"}}
 * {"v":1,"node":"<id>","type":"cancel","principal":"alice","id":"listen:1"}
 * ```
 *
 * Anyone who can PUBLISH on the channel can put bytes here, so a received message is decoded strictly:
 * the version, the node id, the type, the exact set of keys, the event through the engine's own
 * `validateEvent`, and no `__proto__` key anywhere. Whatever fails is dropped, never delivered.
 */
import { validateEvent, type RequestId, type SubscriptionEvent } from '../../lib/internal.ts';
import { MAX_NODE_ID_LENGTH } from './options.ts';

/** The format this code writes and the only one it reads; a node of another format is foreign. */
export const WIRE_VERSION = 1;

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

class ForbiddenKey extends Error {}

/**
 * `JSON.parse` keeps a `"__proto__"` key as an own property; a host listener that later copies the
 * event with `Object.assign` would turn it into a prototype. Such a message is refused outright.
 */
function refuseProtoKeys(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new ForbiddenKey();
  return value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
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
  /** How every message of this node starts: its own messages are recognized without being parsed. */
  private readonly ownPrefix: string;

  constructor(private readonly nodeId: string) {
    this.ownPrefix = `{"v":${WIRE_VERSION},"node":${JSON.stringify(nodeId)},`;
    this.eventHead = `${this.ownPrefix}"type":"event","event":`;
    this.cancelHead = `${this.ownPrefix}"type":"cancel","principal":`;
  }

  /** An event message. Throws what `JSON.stringify` throws (a `BigInt` or a cycle in a task's state). */
  event(event: SubscriptionEvent): string {
    return `${this.eventHead}${JSON.stringify(event)}}`;
  }

  /** A cancellation message. */
  cancel(principal: string, id: RequestId): string {
    return `${this.cancelHead}${JSON.stringify(principal)},"id":${JSON.stringify(id)}}`;
  }

  /** Decodes a received message strictly. */
  decode(raw: string): Decoded {
    if (raw.startsWith(this.ownPrefix)) return { type: 'own' };
    if (tooLarge(raw)) return drop('too-large');
    let message: unknown;
    try {
      message = JSON.parse(raw, refuseProtoKeys);
    } catch (error) {
      return drop(error instanceof ForbiddenKey ? 'forbidden-key' : 'not-json');
    }
    if (!isPlainObject(message)) return drop('not-object');
    if (message.v !== WIRE_VERSION) return drop('version');
    const node = message.node;
    if (typeof node !== 'string' || node === '' || node.length > MAX_NODE_ID_LENGTH) return drop('node');
    // Our own id in a message that does not start as ours do: someone else's forgery; ignored all the same.
    if (node === this.nodeId) return { type: 'own' };
    switch (message.type) {
      case 'event': {
        if (!hasExactly(message, EVENT_KEYS)) return drop('keys');
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
