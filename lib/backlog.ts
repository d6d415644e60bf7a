/**
 * What a bus node could not publish (it was disconnected, the server refused, a shard was down): the
 * latest event of each key, bounded, to publish once it is back. Listen's notifications are hints to
 * read again, so the latest event of a key stands for every change of it that was lost; past the bound
 * the node no longer knows which keys changed, and asks every node to resync everything instead.
 */
import type { SubscriptionEvent } from './types.ts';

/** The keys a backlog keeps at the most before it gives up naming them. */
export const DEFAULT_BACKLOG_KEYS = 10_000;

/** What a backlog hands back to be published. */
export interface BacklogContents {
  /** The latest unsent event of each key, oldest key first. */
  readonly events: SubscriptionEvent[];
  /** More keys changed than the bound: every node should resync every key. */
  readonly all: boolean;
}

function keyOf(event: SubscriptionEvent): string {
  switch (event.kind) {
    case 'resource_updated':
      return `u:${event.uri}`;
    case 'task_status':
      return `t:${event.task.taskId}`;
    default:
      return event.kind;
  }
}

/** The unsent changes of one bus node, by key. */
export class UnsentBacklog {
  private readonly events = new Map<string, SubscriptionEvent>();
  private overflowed = false;

  constructor(private readonly limit = DEFAULT_BACKLOG_KEYS) {}

  /** Keys waiting (0 when overflowed: then everything is). */
  get size(): number {
    return this.events.size;
  }

  /** Whether anything waits to be published. */
  get pending(): boolean {
    return this.overflowed || this.events.size > 0;
  }

  /** Whether the bound was passed: the next flush asks for a resync of everything. */
  get overflow(): boolean {
    return this.overflowed;
  }

  /** Keeps `event` as its key's latest unsent change. */
  remember(event: SubscriptionEvent): void {
    if (this.overflowed) return;
    const key = keyOf(event);
    // Deleted first, so that the map's order stays the order of the latest changes.
    this.events.delete(key);
    if (this.events.size >= this.limit) {
      this.events.clear();
      this.overflowed = true;
      return;
    }
    this.events.set(key, event);
  }

  /** Gives up naming keys: the next flush asks every node to resync everything. */
  markAll(): void {
    this.events.clear();
    this.overflowed = true;
  }

  /** Everything waiting, handed over and forgotten (remember() again what fails to go out). */
  take(): BacklogContents {
    const contents = { events: [...this.events.values()], all: this.overflowed };
    this.events.clear();
    this.overflowed = false;
    return contents;
  }

  /** Forgets everything (the node closes). */
  clear(): void {
    this.events.clear();
    this.overflowed = false;
  }
}
