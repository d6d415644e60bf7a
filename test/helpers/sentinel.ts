/**
 * Reading a sample app's notifications without proving absence by waiting: every watched stream also
 * follows a "sentinel" shared note, and after an action the test fires the sentinel and asserts what
 * arrived before the sentinel's event. With several instances (REDIS_URL), the sentinel is fired
 * through the instance whose events must have arrived first: events from one instance keep their
 * order, events from two need not. Used by the contract suite and the Redis fault suite.
 */
import { expect } from '@jest/globals';
import type { ListenFilter, ListenSubscription, NotificationItem } from 'mcp-subscriptions/client';
import { putNote, TOKENS, type SampleApp } from './sample-app.ts';
import { uid } from './uid.ts';

const UPDATED = 'notifications/resources/updated';
const TASK = 'notifications/tasks';

/**
 * Opens a listen with the package's client and keeps it for the suite's own clean-up (which differs:
 * the contract suite has the server cancel each test's subscriptions, the fault suite closes them).
 */
export type Subscribe = (
  app: SampleApp,
  token: string | undefined,
  id: string | number,
  filter: ListenFilter,
) => Promise<ListenSubscription>;

/** Whether `n` is the update of `uri`. */
export const isUpdateOf =
  (uri: string) =>
  (n: NotificationItem): boolean =>
    n.method === UPDATED && n.params.uri === uri;

/** One line per message, for readable comparisons: the method, and what it is about. */
export function describeMessage(message: any): string {
  if (message?.method === UPDATED) return `${UPDATED} ${message.params?.uri}`;
  if (message?.method === TASK) return `${TASK} ${message.params?.taskId} ${message.params?.status}`;
  return typeof message?.method === 'string' ? message.method : JSON.stringify(message);
}

/**
 * A shared note every watched stream also subscribes to. It is created up front (on each instance:
 * each keeps notes of its own), so that firing it (an update) emits exactly one `resources/updated`
 * for its URI and nothing else.
 */
export class Sentinel {
  readonly uri: string;

  private constructor(private readonly app: SampleApp) {
    this.uri = `note://shared/${uid('sentinel')}`;
  }

  /** A sentinel whose note is created on `app` (and on `others`); it fires through `app` by default. */
  static async create(app: SampleApp, ...others: SampleApp[]): Promise<Sentinel> {
    return Sentinel.named(app).createOn(app, ...others);
  }

  /** A sentinel whose note does not exist yet: call {@link createOn}. */
  static named(app: SampleApp): Sentinel {
    return new Sentinel(app);
  }

  async createOn(...instances: SampleApp[]): Promise<this> {
    for (const instance of instances) {
      const res = await putNote(instance, TOKENS.carol, this.uri, 'created');
      expect(res.status).toBe(201);
    }
    return this;
  }

  async fire(via: SampleApp = this.app): Promise<void> {
    const res = await putNote(via, TOKENS.carol, this.uri, uid('tick'));
    expect(res.status).toBe(200);
  }
}

/** A subscription read in batches: each batch is what arrived since the previous one, up to the next sentinel. */
export class Watch {
  constructor(
    readonly subscription: ListenSubscription,
    private readonly sentinel: Sentinel,
  ) {}

  /** What arrived before the next sentinel event (one-line descriptions, sorted unless `ordered`); moves past it. */
  async next({ ordered = false } = {}): Promise<string[]> {
    const batch: string[] = [];
    const isSentinel = isUpdateOf(this.sentinel.uri);
    await this.subscription.waitFor(
      (notification) => isSentinel(notification) || (batch.push(describeMessage(notification.message)), false),
      { timeoutMs: 5000 },
    );
    expect(this.subscription.dropped).toBe(0); // nothing was let go unseen
    return ordered ? batch : [...batch].sort();
  }
}

/** Opens a subscription to `filter` that also follows `sentinel`, and reads it in batches. */
export type WatchOpener = (
  app: SampleApp,
  sentinel: Sentinel,
  token: string | undefined,
  id: string | number,
  filter: ListenFilter,
) => Promise<Watch>;

/**
 * The suite's `watch()`, opening its subscriptions with `subscribe`. Their buffers must be far above
 * what a test sends between two reads: `Watch.next()` checks that none was dropped.
 */
export function watcher(subscribe: Subscribe): WatchOpener {
  return async (app, sentinel, token, id, filter) => {
    const uris = filter.resourceSubscriptions ?? [];
    const subscription = await subscribe(app, token, id, { ...filter, resourceSubscriptions: [...uris, sentinel.uri] });
    expect(subscription.honored.resourceSubscriptions).toContain(sentinel.uri); // a shared note is readable by all
    return new Watch(subscription, sentinel);
  };
}
