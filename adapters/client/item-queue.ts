/**
 * The subscription's buffer: the items a consumer has not taken yet, in order, with at most
 * `maxBuffer` notifications among them. Markers (`gap`, `end`) are not counted: there is one per
 * re-listen at most, and the consumer must see each.
 *
 * Drops are counted where they happened, as one `dropped` item per run: a dropped notification's
 * count moves onto the entry after it (`droppedBefore`), or, at the tail, waits for the next entry
 * (`#tailDrops`), and `shift()` hands out a pending count as a `dropped` item before that entry. So
 * dropping costs no allocation and no splice, and consecutive drops merge by themselves.
 */
import type { DroppedItem, NotificationItem, OverflowPolicy, SubscriptionItem } from './types.ts';

interface Entry {
  readonly item: SubscriptionItem;
  /** Notifications dropped just before this one. */
  droppedBefore: number;
}

/** A head index past which the array is compacted, so that a long-lived queue does not grow. */
const COMPACT_AFTER = 1024;

export class ItemQueue {
  readonly #max: number;
  readonly #policy: OverflowPolicy;
  #entries: (Entry | undefined)[] = [];
  #head = 0;
  #notifications = 0;
  #tailDrops = 0;
  #dropped = 0;

  constructor(max: number, policy: OverflowPolicy) {
    this.#max = max;
    this.#policy = policy;
  }

  /** Notifications dropped so far, in total. */
  get dropped(): number {
    return this.#dropped;
  }

  /**
   * Queues a notification. Returns `false` when the buffer was full under the `'close'` policy: it was
   * not queued (it counts as dropped), and the subscription must end.
   */
  pushNotification(item: NotificationItem): boolean {
    if (this.#notifications >= this.#max) {
      if (this.#policy !== 'drop-oldest') {
        this.#tailDrops += 1;
        this.#dropped += 1;
        return this.#policy === 'drop-newest';
      }
      this.#dropOldest();
    }
    this.#append(item);
    this.#notifications += 1;
    return true;
  }

  /** Queues a `gap` or `end` marker (never dropped, never counted against the bound). */
  pushMarker(item: SubscriptionItem): void {
    this.#append(item);
  }

  /** The next item, or `undefined` when there is none; a pending drop count comes out as a `dropped` item first. */
  shift(): SubscriptionItem | undefined {
    const entry = this.#entries[this.#head];
    if (entry === undefined) {
      if (this.#tailDrops === 0) return undefined;
      const count = this.#tailDrops;
      this.#tailDrops = 0;
      return dropped(count);
    }
    if (entry.droppedBefore > 0) {
      const count = entry.droppedBefore;
      entry.droppedBefore = 0;
      return dropped(count);
    }
    this.#entries[this.#head] = undefined;
    this.#head += 1;
    if (this.#head === this.#entries.length) {
      this.#entries = [];
      this.#head = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
    if (entry.item.type === 'notification') this.#notifications -= 1;
    return entry.item;
  }

  #append(item: SubscriptionItem): void {
    this.#entries.push({ item, droppedBefore: this.#tailDrops });
    this.#tailDrops = 0;
  }

  /** Forgets the oldest notification; its count (and the drops before it) moves onto what follows it. */
  #dropOldest(): void {
    let at = this.#head;
    while ((this.#entries[at] as Entry).item.type !== 'notification') at += 1;
    const carried = (this.#entries[at] as Entry).droppedBefore + 1;
    // Only markers precede it (a few at most): move them one place on, over it.
    for (let i = at; i > this.#head; i--) this.#entries[i] = this.#entries[i - 1];
    this.#entries[this.#head] = undefined;
    this.#head += 1;
    const next = this.#entries[at + 1];
    if (next === undefined) this.#tailDrops += carried;
    else next.droppedBefore += carried;
    this.#notifications -= 1;
    this.#dropped += 1;
  }
}

function dropped(count: number): DroppedItem {
  return { type: 'dropped', count };
}
