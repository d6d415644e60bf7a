/**
 * The interest of one bus node, kept the one way that cannot drift: what the node wants comes from
 * reference counts (the keys its streams follow, through leases), what the server has comes from the
 * server's replies only, and one reconciler acts on the difference after every reply, ready, loss or
 * release (a level-triggered loop, as a Kubernetes controller's). Engine-agnostic: a bus gives it a
 * channel per key and a way to subscribe and unsubscribe channels (Redis SUBSCRIBE, SSUBSCRIBE on a
 * cluster, PostgreSQL LISTEN), and tells it when the connection is ready or what it lost.
 *
 * The resync rule lives here too: a channel that was wanted while it was not subscribed (lost with the
 * connection, its shard or its slot; or a stream acknowledged before its SUBSCRIBE was answered) has a
 * gap, and when its subscription is confirmed again the keys that follow it are handed to the bus's
 * `gap` hook, once per gap, so that the streams following them are told that they may have changed.
 */
import type { BusInterest, InterestLease, ListChangedKind } from './types.ts';

/** The kinds of keys a stream follows: list changes, resource URIs, task ids, a principal's cancellations. */
export type InterestKeyType = 'l' | 'u' | 't' | 'c';

/** What the reconciler needs of an engine's connection. Neither method may throw: failures reject. */
export interface InterestTransport {
  /** Whether commands go out now (the connection is up). */
  isReady(): boolean;
  /** Subscribes `channels`; resolves once the server confirmed every one of them. */
  subscribe(channels: readonly string[]): Promise<unknown>;
  /** Unsubscribes `channels`; resolves once the server confirmed. */
  unsubscribe(channels: readonly string[]): Promise<unknown>;
}

/** The keys whose channel had a gap: what the streams following them may have missed. */
export interface GapKeys {
  readonly lists: ListChangedKind[];
  readonly uris: string[];
  readonly taskIds: string[];
}

/** What the reconciler tells its bus. */
export interface InterestHooks {
  /** Keys whose channel is subscribed again after a gap: tell their streams they may have changed. */
  gap(keys: GapKeys): void;
  /** A SUBSCRIBE or UNSUBSCRIBE failed (it is retried with a backoff): for the bus's outage report. */
  failed(error: unknown): void;
  /** A reply came and was taken into account (for the bus's view of its connection, {@link InterestReconciler.restored}). */
  settled(): void;
}

/** The reconciler's bounds. */
export interface InterestOptions {
  /** The channel of a key. Called once per key new to this node. */
  readonly channelOf: (type: InterestKeyType, key: string) => string;
  /**
   * How long a channel no key wants stays subscribed: a client that listens again within it (a page
   * reload) costs no UNSUBSCRIBE and SUBSCRIBE.
   */
  readonly lingerMs: number;
  /** How long a lease's `ready` waits for its SUBSCRIBE before it settles anyway (the channel then has a gap). */
  readonly followTimeoutMs: number;
  /** The most channels in one SUBSCRIBE or UNSUBSCRIBE. */
  readonly batchSize: number;
}

/** What a channel is on the server, as its replies said. */
const enum State {
  /** Not subscribed, and no command about it in flight. */
  Absent,
  Subscribing,
  Subscribed,
  Unsubscribing,
  /**
   * Unknown: the connection (or the channel's shard) was lost while it was not absent, so the server
   * may or may not hold it (a client library that resubscribes by itself would). Subscribed again if
   * wanted, unsubscribed otherwise.
   */
  Stale,
}

/** The first retry of a failed command, doubling to {@link MAX_RETRY_MS}. */
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

interface Key {
  readonly type: InterestKeyType;
  readonly key: string;
  readonly channel: Channel;
  /** Leases that hold it. */
  count: number;
}

interface Channel {
  readonly name: string;
  /** Keys that want it, plus the bus's own hold for a fixed channel. */
  refs: number;
  /** The keys on it: one, or a set (several keys share a channel under bucket routing). */
  keys: Key | Set<Key> | undefined;
  state: State;
  /** The command in flight, by number: a reply to another (an older one, before a loss) is ignored. */
  op: number;
  /** Wanted while not subscribed: its keys are resynced once it is subscribed again. */
  gap: boolean;
  /** When its last key let go of it (for the linger). */
  idleSince: number;
  /** Leases waiting for its SUBSCRIBE. */
  waiters: Set<Waiter> | undefined;
  /** Called on a gap of a fixed channel (which has no keys of its own). */
  onGap: (() => void) | undefined;
}

/** One lease's wait for the SUBSCRIBE of the channels new to it. */
interface Waiter {
  pending: number;
  done(): void;
}

/**
 * The one source of truth of a bus node's interest, and the loop that brings the server in line with
 * it. See the module's comment.
 */
export class InterestReconciler {
  private readonly keys: Record<InterestKeyType, Map<string, Key>> = {
    l: new Map(),
    u: new Map(),
    t: new Map(),
    c: new Map(),
  };
  private readonly channels = new Map<string, Channel>();
  /** Channels that may need a command: refs changed, a reply came, a loss. */
  private readonly dirty = new Set<Channel>();
  /** Channels no key wants, subscribed until their linger ends. */
  private readonly idle = new Set<Channel>();
  private scheduled = false;
  private lingerTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = FIRST_RETRY_MS;
  private seq = 0;
  private closed = false;
  private confirmed = 0;
  /** Wanted channels with a gap: `restored` is asked after every reply, so it is kept, not counted. */
  private gapped = 0;

  constructor(
    private readonly transport: InterestTransport,
    private readonly hooks: InterestHooks,
    private readonly options: InterestOptions,
  ) {}

  /** Channels the server confirmed subscribed, as its replies said. */
  get subscribed(): number {
    return this.confirmed;
  }

  /** Channels wanted now (by keys or held fixed) that the server has not confirmed. */
  get missing(): number {
    let missing = 0;
    for (const channel of this.channels.values()) if (channel.refs > 0 && channel.state !== State.Subscribed) missing++;
    return missing;
  }

  /**
   * Whether no wanted channel has a gap: every subscription lost (with the connection, a shard, a
   * failed command) is back. A channel new to this node while its first SUBSCRIBE is on its way has none.
   */
  get restored(): boolean {
    return this.gapped === 0;
  }

  /**
   * Holds `channel` for the bus's whole life (a channel every node of its routing subscribes to,
   * whatever its streams follow). `onGap` runs when it is subscribed again after a gap.
   */
  hold(channel: string, onGap?: () => void): void {
    const record = this.channel(channel);
    record.refs++;
    record.onGap = onGap;
    this.touch(record);
  }

  /**
   * A stream is about to open with `interest`: its keys are wanted from now until the lease is released
   * (once; later calls do nothing). `ready` settles once every channel new to it is confirmed
   * subscribed, or after `followTimeoutMs`; it is `undefined` when there is nothing to wait for (every
   * channel subscribed already, or the connection down: then the channels are subscribed once it is
   * back, and the keys resynced).
   */
  follow(interest: BusInterest): InterestLease {
    if (this.closed) return { ready: undefined, release: noop };
    let waiter: Waiter | undefined;
    const ready = this.transport.isReady();
    const visit = (type: InterestKeyType, key: string): void => {
      const map = this.keys[type];
      let held = map.get(key);
      if (held === undefined) {
        const channel = this.channel(this.options.channelOf(type, key));
        held = { type, key, channel, count: 0 };
        map.set(key, held);
        addKey(channel, held);
        if (channel.refs++ === 0) this.idle.delete(channel);
        this.touch(channel);
      }
      held.count++;
      const channel = held.channel;
      if (channel.state === State.Subscribed) return;
      if (!ready) {
        // Acknowledged before its subscription: whatever is published meanwhile is noticed by the resync.
        this.markGap(channel);
        return;
      }
      waiter ??= { pending: 0, done: noop };
      if (channel.waiters?.has(waiter) === true) return;
      (channel.waiters ??= new Set()).add(waiter);
      waiter.pending++;
    };
    eachKey(interest, visit);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.release(interest);
    };
    if (waiter === undefined) return { ready: undefined, release };
    const waiting = waiter;
    const settled = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        // Not confirmed in time: the ack goes out now, and the channels still waited for have a gap.
        waiting.pending = 0;
        waiting.done = noop;
        eachKey(interest, (type, key) => {
          const channel = this.keys[type].get(key)?.channel;
          if (channel?.waiters?.delete(waiting) === true) this.markGap(channel);
        });
        resolve();
      }, this.options.followTimeoutMs);
      timer.unref();
      waiting.done = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    return { ready: settled, release };
  }

  /** The connection is ready (first, or again): every channel is brought in line. */
  ready(): void {
    if (this.closed) return;
    this.retryMs = FIRST_RETRY_MS;
    for (const channel of this.channels.values()) this.dirty.add(channel);
    this.schedule();
  }

  /**
   * The server may have dropped `channels` (every channel when omitted): the connection closed, or a
   * shard failed, or a slot moved. Each becomes unknown; a wanted one has a gap, and is subscribed
   * again once the transport is ready.
   */
  lost(channels?: Iterable<string>): void {
    if (this.closed) return;
    const records =
      channels === undefined
        ? this.channels.values()
        : [...channels].map((name) => this.channels.get(name)).filter((record) => record !== undefined);
    for (const channel of records) {
      if (channel.state === State.Absent) continue;
      if (channel.state === State.Subscribed) this.confirmed--;
      channel.state = State.Stale;
      channel.op = 0;
      this.markGap(channel);
      this.dirty.add(channel);
    }
    this.schedule();
  }

  /** Every channel the server may hold (for the bus's own unsubscribe on close); nothing more is sent. */
  close(): string[] {
    this.closed = true;
    clearTimeout(this.lingerTimer);
    clearTimeout(this.retryTimer);
    const held: string[] = [];
    for (const channel of this.channels.values()) {
      if (channel.state !== State.Absent) held.push(channel.name);
      for (const waiter of channel.waiters ?? []) waiter.done();
    }
    this.channels.clear();
    this.dirty.clear();
    this.idle.clear();
    this.gapped = 0;
    return held;
  }

  private channel(name: string): Channel {
    let channel = this.channels.get(name);
    if (channel === undefined) {
      channel = {
        name,
        refs: 0,
        keys: undefined,
        state: State.Absent,
        op: 0,
        gap: false,
        idleSince: 0,
        waiters: undefined,
        onGap: undefined,
      };
      this.channels.set(name, channel);
    }
    return channel;
  }

  private release(interest: BusInterest): void {
    if (this.closed) return;
    const visit = (type: InterestKeyType, key: string): void => {
      const map = this.keys[type];
      const held = map.get(key);
      if (held === undefined || --held.count > 0) return;
      map.delete(key);
      const channel = held.channel;
      removeKey(channel, held);
      if (--channel.refs > 0) return;
      // No stream follows it any more: nobody to resync.
      this.clearGap(channel);
      channel.idleSince = Date.now();
      this.touch(channel);
    };
    eachKey(interest, visit);
  }

  /** A channel that streams follow may have missed something: they are resynced once it is subscribed again. */
  private markGap(channel: Channel): void {
    if (channel.refs === 0 || channel.gap) return;
    channel.gap = true;
    this.gapped++;
  }

  private clearGap(channel: Channel): void {
    if (!channel.gap) return;
    channel.gap = false;
    this.gapped--;
  }

  private touch(channel: Channel): void {
    this.dirty.add(channel);
    this.schedule();
  }

  /** One reconcile per turn of the event loop, however many follows, releases and replies came in it. */
  private schedule(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(this.reconcile);
  }

  private readonly reconcile = (): void => {
    this.scheduled = false;
    if (this.closed || !this.transport.isReady()) return;
    const now = Date.now();
    const subscribe: Channel[] = [];
    const unsubscribe: Channel[] = [];
    for (const channel of this.dirty) {
      this.dirty.delete(channel);
      switch (channel.state) {
        case State.Subscribing:
        case State.Unsubscribing:
          // One command at a time per channel: its reply marks it dirty again.
          break;
        case State.Absent:
          if (channel.refs > 0) subscribe.push(channel);
          else this.forget(channel);
          break;
        case State.Stale:
          if (channel.refs > 0) subscribe.push(channel);
          else unsubscribe.push(channel);
          break;
        case State.Subscribed:
          if (channel.refs > 0) this.idle.delete(channel);
          else if (now - channel.idleSince >= this.options.lingerMs) unsubscribe.push(channel);
          else this.idle.add(channel);
          break;
      }
    }
    this.send(subscribe, true);
    this.send(unsubscribe, false);
    this.armLinger(now);
  };

  private forget(channel: Channel): void {
    if (channel.refs > 0 || channel.state !== State.Absent || channel.waiters?.size) return;
    this.channels.delete(channel.name);
    this.idle.delete(channel);
  }

  private armLinger(now: number): void {
    if (this.idle.size === 0 || this.lingerTimer !== undefined) return;
    let first = Infinity;
    for (const channel of this.idle) first = Math.min(first, channel.idleSince);
    this.lingerTimer = setTimeout(
      () => {
        this.lingerTimer = undefined;
        for (const channel of this.idle) this.dirty.add(channel);
        this.idle.clear();
        this.schedule();
      },
      Math.max(0, first + this.options.lingerMs - now),
    );
    this.lingerTimer.unref();
  }

  private send(channels: Channel[], subscribe: boolean): void {
    const size = this.options.batchSize;
    for (let at = 0; at < channels.length; at += size) {
      const batch = channels.slice(at, at + size);
      const op = ++this.seq;
      for (const channel of batch) {
        if (channel.state === State.Subscribed) this.confirmed--;
        channel.state = subscribe ? State.Subscribing : State.Unsubscribing;
        channel.op = op;
      }
      const names = batch.map((channel) => channel.name);
      const sent = subscribe ? this.transport.subscribe(names) : this.transport.unsubscribe(names);
      sent.then(
        () => this.settle(batch, op, subscribe),
        (error: unknown) => this.refused(batch, op, error),
      );
    }
  }

  private settle(batch: readonly Channel[], op: number, subscribed: boolean): void {
    if (this.closed) return;
    let lists: ListChangedKind[] | undefined;
    let uris: string[] | undefined;
    let taskIds: string[] | undefined;
    const gaps: (() => void)[] = [];
    for (const channel of batch) {
      // Lost (or sent again) since: the reply speaks of a connection that is gone.
      if (channel.op !== op) continue;
      channel.op = 0;
      this.dirty.add(channel);
      if (!subscribed) {
        channel.state = State.Absent;
        continue;
      }
      channel.state = State.Subscribed;
      this.confirmed++;
      if (channel.waiters !== undefined) {
        for (const waiter of channel.waiters) if (--waiter.pending === 0) waiter.done();
        channel.waiters = undefined;
      }
      if (!channel.gap) continue;
      this.clearGap(channel);
      if (channel.onGap !== undefined) gaps.push(channel.onGap);
      for (const key of keysOf(channel)) {
        if (key.type === 'l') (lists ??= []).push(key.key as ListChangedKind);
        else if (key.type === 'u') (uris ??= []).push(key.key);
        else if (key.type === 't') (taskIds ??= []).push(key.key);
      }
    }
    this.retryMs = FIRST_RETRY_MS;
    this.schedule();
    for (const gap of gaps) gap();
    if (lists !== undefined || uris !== undefined || taskIds !== undefined) {
      this.hooks.gap({ lists: lists ?? [], uris: uris ?? [], taskIds: taskIds ?? [] });
    }
    this.hooks.settled();
  }

  private refused(batch: readonly Channel[], op: number, error: unknown): void {
    if (this.closed) return;
    let any = false;
    for (const channel of batch) {
      if (channel.op !== op) continue;
      any = true;
      channel.op = 0;
      // The server's state is unknown after a failed command: the next round finds out.
      channel.state = State.Stale;
      this.markGap(channel);
      this.dirty.add(channel);
    }
    if (!any) return;
    this.hooks.failed(error);
    this.hooks.settled();
    // Tried again with a backoff, not at once: a server that refuses (an ACL) would be asked in a loop.
    if (this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.schedule();
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }
}

function noop(): void {}

function addKey(channel: Channel, key: Key): void {
  const keys = channel.keys;
  if (keys === undefined) channel.keys = key;
  else if (keys instanceof Set) keys.add(key);
  else channel.keys = new Set([keys, key]);
}

function removeKey(channel: Channel, key: Key): void {
  const keys = channel.keys;
  if (keys === key) channel.keys = undefined;
  else if (keys instanceof Set) {
    keys.delete(key);
    if (keys.size === 1) channel.keys = keys.values().next().value;
  }
}

function keysOf(channel: Channel): Iterable<Key> {
  const keys = channel.keys;
  return keys === undefined ? [] : keys instanceof Set ? keys : [keys];
}

/** Calls `visit` with each key of `interest`, by kind: the one walk of an interest. */
function eachKey(interest: BusInterest, visit: (type: InterestKeyType, key: string) => void): void {
  for (const kind of interest.lists) visit('l', kind);
  for (const uri of interest.uris) visit('u', uri);
  for (const taskId of interest.taskIds) visit('t', taskId);
  if (interest.principal !== undefined) visit('c', interest.principal);
}
