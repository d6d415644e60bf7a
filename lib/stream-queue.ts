/**
 * The bounded, coalescing queue of one stream. It only holds frames while the socket pushes back;
 * a stream that keeps up never allocates one.
 */
import type { SplitFrame } from './sse.ts';

/** What happened to one event offered to the queue. */
export type QueueOutcome = 'queued' | 'coalesced';

/**
 * Insertion-ordered map from a coalescing key to the frame to write. Events are level-triggered
 * ("the tools list changed", "this URI changed"), so a second one with a key already queued merges
 * into the queued entry in place: a queue never holds more entries than the distinct keys of the
 * stream's filter, which bounds it (no count of its own could be lower without dropping the latest
 * state of a key unseen). The frames are the publish's own split frames, shared by every stream it reached;
 * the stream's id is spliced in only when they are written, so an entry costs a reference, whatever
 * the size of the listen id.
 */
export class StreamQueue {
  private readonly entries = new Map<string, SplitFrame>();

  /** Frames currently queued. */
  get size(): number {
    return this.entries.size;
  }

  /** Offers one frame under its coalescing key. */
  push(key: string, frame: SplitFrame): QueueOutcome {
    // Map.set on an existing key keeps its position: the merged event goes out where the first was.
    // One set says which it was (the size grew or not): one lookup, not two.
    const before = this.entries.size;
    this.entries.set(key, frame);
    return this.entries.size === before ? 'coalesced' : 'queued';
  }

  /**
   * Removes and returns frames in order, joined with the stream's id, for one write: up to `limit`
   * frames, and none more once the text has reached `maxChars` (one at least, however long).
   */
  take(limit: number, idJson: string, maxChars: number): { text: string; count: number } {
    let text = '';
    let count = 0;
    for (const [key, frame] of this.entries) {
      if (count === limit || text.length >= maxChars) break;
      text += frame.head + idJson + frame.tail;
      count++;
      this.entries.delete(key);
    }
    return { text, count };
  }

  /** Forgets every queued frame; returns how many there were. */
  clear(): number {
    const count = this.entries.size;
    this.entries.clear();
    return count;
  }
}
