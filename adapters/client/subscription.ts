/**
 * One subscription, as `listen()` hands it over: the current connection, the buffer its notifications
 * wait in, the consumer's pulls (iteration and `waitFor()`), the end, and re-listening when it is on.
 */
import { ErrorCode, type NotificationFilter, type RequestId } from '../../lib/internal.ts';
import { openConnection, type Connection, type ConnectionEvents } from './connection.ts';
import { ListenError, WaitForError } from './errors.ts';
import { ItemQueue } from './item-queue.ts';
import { resolveWaitFor, type ResolvedListen } from './options.ts';
import { backoffDelay, isRetryable } from './retry.ts';
import type {
  EndItem,
  EndReason,
  JsonRpcNotification,
  NotificationItem,
  NotificationMatch,
  SubscriptionItem,
  WaitForOptions,
} from './types.ts';

/** A consumer waiting for the next item; `undefined` means the iterator is finished. */
type Pull = (item: SubscriptionItem | undefined) => void;

/** How many non-matching notifications a `WaitForError` keeps, to say what came instead. */
const RECEIVED_KEPT = 100;

/** Whether a honoured filter holds anything: an empty one is completed at once, and never re-listened. */
function holdsAnything(filter: NotificationFilter): boolean {
  return Object.values(filter).some((value) => value === true || (Array.isArray(value) && value.length > 0));
}

/** One line per notification, for messages: the method, and what it is about. */
function describeNotification(item: NotificationItem): string {
  const about = item.params.uri ?? item.params.taskId;
  return typeof about === 'string' ? `${item.method} ${about}` : item.method;
}

/**
 * An open subscription: an async iterable of {@link SubscriptionItem}s (notifications, `dropped`
 * counts, `gap` markers after a re-listen, then one `end`), made by `listen()`.
 *
 * Items wait in a buffer of `maxBuffer` notifications until taken, by `for await`, by `next()` on its
 * iterator, or by `waitFor()`; they are taken once, by whichever asks first. Leaving a `for await` loop
 * (`break`, `return`, a throw) closes the subscription.
 *
 * @example
 * ```ts
 * const subscription = await listen(url, { resourceSubscriptions: [uri] }, { reconnect: true });
 * for await (const item of subscription) {
 *   if (item.type === 'notification') refresh(item.params.uri);
 *   else if (item.type === 'gap' || item.type === 'dropped') refreshEverything();
 * }
 * ```
 */
export class ListenSubscription implements AsyncIterable<SubscriptionItem> {
  /** The request id, hence the subscription id of every message (the same on every re-listen). */
  readonly id: RequestId;
  readonly #config: ResolvedListen;
  readonly #queue: ItemQueue;
  /** Aborted when the subscription ends: stops the connection, a re-listen in flight and its backoff. */
  readonly #closing = new AbortController();
  #pulls: Pull[] = [];
  /** An `end` item `waitFor()` took and put back, so that iteration still ends with it. */
  #putBack: EndItem | undefined;
  #finished = false;
  #honored: NotificationFilter = Object.freeze({});
  #connection: Connection | undefined;
  #endReason: EndReason | undefined;
  #error: ListenError | undefined;
  #reconnects = 0;
  readonly #ended: Promise<EndReason>;
  #resolveEnded!: (reason: EndReason) => void;
  /** The caller's signal: aborts the request before the acknowledgement, closes the subscription after it. */
  readonly #onSignal = (): void => {
    this.#closing.abort(this.#config.signal?.reason);
    this.#finish('closed');
  };

  /** Use `listen()`. */
  private constructor(config: ResolvedListen) {
    this.id = config.id;
    this.#config = config;
    this.#queue = new ItemQueue(config.maxBuffer, config.overflow);
    this.#ended = new Promise((resolve) => (this.#resolveEnded = resolve));
  }

  /** @internal Listens, and resolves once the acknowledgement arrived: the work behind `listen()`, which to call instead. */
  static async open(config: ResolvedListen): Promise<ListenSubscription> {
    const subscription = new ListenSubscription(config);
    await subscription.#start();
    return subscription;
  }

  async #start(): Promise<void> {
    const { signal } = this.#config;
    if (signal?.aborted === true) this.#onSignal();
    else signal?.addEventListener('abort', this.#onSignal, { once: true });
    const connection = openConnection(this.#config, this.#events(), this.#closing.signal);
    this.#connection = connection;
    try {
      await connection.acknowledged;
    } catch (error) {
      this.#finish('closed');
      throw error;
    }
  }

  /** What the server agreed to deliver, from the latest acknowledgement (a re-listen may change it). */
  get honored(): NotificationFilter {
    return this.#honored;
  }

  /** Notifications the buffer dropped so far, in total (each run also comes as a `dropped` item). */
  get dropped(): number {
    return this.#queue.dropped;
  }

  /** Successful re-listens so far (each came as a `gap` item). */
  get reconnects(): number {
    return this.#reconnects;
  }

  /** Why the subscription ended; `undefined` while it is open or re-listening. */
  get endReason(): EndReason | undefined {
    return this.#endReason;
  }

  /**
   * The failure behind an end with the reason `'refused'`, or `'lost'` after re-listening gave up or
   * after an event past `maxEventBytes` (`ErrorCode.ListenEventTooLarge`) when re-listening is off.
   */
  get error(): ListenError | undefined {
    return this.#error;
  }

  /**
   * Resolves with the end reason once the subscription has ended (which may be before the consumer
   * reached its `end` item). Never rejects.
   */
  get ended(): Promise<EndReason> {
    return this.#ended;
  }

  /**
   * Closes the subscription: aborts the stream (the server sees the client leave, spec §4) or a
   * re-listen in progress. Items already buffered can still be taken, then `end` with the reason
   * `'closed'`. Idempotent; resolves at once.
   *
   * Node's own `fetch` (undici) opens a spare connection to the server whenever a streaming response
   * is aborted, and no request ever uses it (nodejs/undici#5845): a server's `close()` then waits for
   * it (a few seconds) unless it calls `closeAllConnections()`, as a test's teardown may.
   */
  close(): Promise<void> {
    this.#finish('closed');
    return Promise.resolve();
  }

  /**
   * Takes items until a notification matches, and resolves with it: `match` is a method
   * (`'notifications/tools/list_changed'`) or a predicate. The items before it are consumed, whatever
   * they are. Rejects with a `WaitForError` naming what it waited for and what came instead: after
   * `timeoutMs` (`ErrorCode.WaitTimeout`), or when the subscription ends first (`ErrorCode.WaitEnded`,
   * the `end` item left for the iterator). A predicate that throws rejects with its error.
   *
   * @example
   * ```ts
   * await api.put('/notes/todo', { text: 'milk' });
   * const update = await subscription.waitFor((n) => n.params.uri === 'note://alice/todo');
   * ```
   */
  waitFor(match: NotificationMatch, options?: WaitForOptions): Promise<NotificationItem> {
    const { timeoutMs } = resolveWaitFor(match, options);
    const matches = typeof match === 'string' ? (item: NotificationItem) => item.method === match : match;
    const awaited = typeof match === 'string' ? match : `a notification matching ${sourceOf(match)}`;
    const received: NotificationItem[] = [];
    return new Promise<NotificationItem>((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const pull: Pull = (item) => {
        if (!handle(item)) step();
      };
      const stop = (): void => {
        clearTimeout(timer);
        const at = this.#pulls.indexOf(pull);
        if (at !== -1) this.#pulls.splice(at, 1);
      };
      const seen = (): string => {
        const lines = received.map(describeNotification);
        return lines.length === 0 ? 'nothing' : lines.join(', ');
      };
      /** Settles on `item` when it decides; `false` to go on. */
      const handle = (item: SubscriptionItem | undefined): boolean => {
        if (item === undefined || item.type === 'end') {
          stop();
          if (item !== undefined) {
            this.#putBack = item;
            this.#wake(); // another consumer waiting gets the end
          }
          const reason = item?.reason ?? this.#endReason ?? 'closed';
          reject(
            new WaitForError(
              ErrorCode.WaitEnded,
              `waitFor() waited for ${awaited}, but the subscription ended ('${reason}'); received: ${seen()}`,
              { awaited, received, reason },
            ),
          );
          return true;
        }
        if (item.type !== 'notification') return false;
        let matched: boolean;
        try {
          matched = matches(item);
        } catch (error) {
          stop();
          reject(error instanceof Error ? error : new Error(String(error)));
          return true;
        }
        if (matched) {
          stop();
          resolve(item);
          return true;
        }
        received.push(item);
        if (received.length > RECEIVED_KEPT) received.shift();
        return false;
      };
      const step = (): void => {
        for (;;) {
          const item = this.#take();
          if (item === undefined && !this.#isDrained()) {
            this.#pulls.push(pull);
            return;
          }
          if (handle(item)) return;
        }
      };
      if (timeoutMs !== false) {
        timer = setTimeout(() => {
          stop();
          reject(
            new WaitForError(
              ErrorCode.WaitTimeout,
              `waitFor() timed out after ${timeoutMs} ms waiting for ${awaited}; received: ${seen()}`,
              { awaited, received },
            ),
          );
        }, timeoutMs);
      }
      step();
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem, undefined> {
    return {
      next: () => this.#next(),
      return: () => {
        this.#finish('closed');
        this.#finished = true;
        this.#wake();
        return Promise.resolve({ done: true, value: undefined });
      },
    };
  }

  #next(): Promise<IteratorResult<SubscriptionItem, undefined>> {
    const item = this.#take();
    if (item !== undefined || this.#isDrained()) return Promise.resolve(this.#result(item));
    return new Promise((resolve) => this.#pulls.push((next) => resolve(this.#result(next))));
  }

  #result(item: SubscriptionItem | undefined): IteratorResult<SubscriptionItem, undefined> {
    if (item === undefined) return { done: true, value: undefined };
    if (item.type === 'end') this.#finished = true;
    return { done: false, value: item };
  }

  /** The next item, if one is there. */
  #take(): SubscriptionItem | undefined {
    if (this.#finished) return undefined;
    const putBack = this.#putBack;
    if (putBack !== undefined) {
      this.#putBack = undefined;
      return putBack;
    }
    return this.#queue.shift();
  }

  /** Nothing more will ever come: the `end` item was taken. */
  #isDrained(): boolean {
    return this.#finished;
  }

  /** Hands queued items to waiting consumers, in the order they asked. */
  #wake(): void {
    while (this.#pulls.length > 0) {
      const item = this.#take();
      if (item === undefined) {
        if (!this.#isDrained()) return;
        for (const pull of this.#pulls.splice(0)) pull(undefined);
        return;
      }
      (this.#pulls.shift() as Pull)(item);
    }
  }

  /** What one connection tells this subscription; `gap` set for a re-listen. */
  #events(gap?: { reason: 'lost' | 'complete'; attempts: number }): ConnectionEvents {
    let current = true;
    return {
      ack: (honored) => {
        this.#honored = honored;
        if (gap !== undefined) {
          this.#reconnects += 1;
          this.#queue.pushMarker({ type: 'gap', reason: gap.reason, honored, attempts: gap.attempts });
          this.#wake();
        }
      },
      notification: (message) => {
        if (this.#endReason !== undefined) return;
        if (!this.#queue.pushNotification(notificationItem(message))) {
          this.#finish('overflow');
          return;
        }
        this.#wake();
      },
      end: (reason, cause) => {
        if (!current || this.#endReason !== undefined) return;
        current = false;
        this.#connection = undefined;
        const { reconnect } = this.#config;
        if (reconnect !== false && (reason === 'lost' || holdsAnything(this.#honored))) void this.#relisten(reason);
        // The client's own reason to give up on a stream (an event past maxEventBytes) is told.
        else this.#finish(reason, cause instanceof ListenError ? cause : undefined);
      },
    };
  }

  /** Listens again after the stream ended by itself, backing off between attempts, until one is acknowledged. */
  async #relisten(cause: 'lost' | 'complete'): Promise<void> {
    const reconnect = this.#config.reconnect as Exclude<ResolvedListen['reconnect'], false>;
    const signal = this.#closing.signal;
    let retryAfterMs: number | undefined;
    let last: ListenError | undefined;
    for (let attempt = 1; ; attempt++) {
      if (reconnect.maxAttempts !== false && attempt > reconnect.maxAttempts) {
        this.#finish('lost', last);
        return;
      }
      await sleep(backoffDelay(reconnect, attempt, retryAfterMs), signal);
      if (signal.aborted) return;
      const connection = openConnection(this.#config, this.#events({ reason: cause, attempts: attempt }), signal);
      this.#connection = connection;
      try {
        await connection.acknowledged;
        return;
      } catch (error) {
        if (signal.aborted) return;
        last = error as ListenError;
        if (!isRetryable(last)) {
          this.#finish('refused', last);
          return;
        }
        retryAfterMs = last.retryAfterMs;
      }
    }
  }

  /** Ends the subscription (once): stops the stream, and queues the `end` item after what is buffered. */
  #finish(reason: EndReason, error?: ListenError): void {
    if (this.#endReason !== undefined) return;
    this.#endReason = reason;
    this.#error = error;
    this.#config.signal?.removeEventListener('abort', this.#onSignal);
    // Aborted first, so that a request still waiting for its ack fails as aborted by the caller's signal.
    this.#closing.abort();
    this.#connection?.close();
    this.#connection = undefined;
    this.#queue.pushMarker(error === undefined ? { type: 'end', reason } : { type: 'end', reason, error });
    this.#resolveEnded(reason);
    this.#wake();
  }
}

function notificationItem(message: JsonRpcNotification): NotificationItem {
  return { type: 'notification', method: message.method, params: message.params ?? {}, message };
}

/** A predicate's source, short enough for a message. */
function sourceOf(predicate: (...args: never[]) => unknown): string {
  const source = String(predicate).replace(/\s+/g, ' ');
  return source.length > 200 ? `${source.slice(0, 200)}…` : source;
}

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
