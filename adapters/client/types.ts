/**
 * Every public option and type of `mcp-subscriptions/client`, in one place (lib/types.ts is the
 * engine's). Types only.
 */
import type { NotificationFilter, RequestId } from '../../lib/internal.ts';
import type { ListenError } from './errors.ts';
import type { EndReason, NotificationItem } from './notifications.ts';

// What a subscription hears and why it ends, documented in notifications.ts (a leaf, which the errors import too).
export type { EndReason, JsonRpcNotification, NotificationItem, NotificationParams } from './notifications.ts';

/**
 * What a full client buffer does with one more notification (see `ListenOptions.overflow`):
 * - `'drop-oldest'`: forget the oldest held, keep the new one (the consumer learns of the latest
 *   changes first);
 * - `'drop-newest'`: keep what is held, forget the new one;
 * - `'close'`: end the subscription with the reason `'overflow'`, after what it holds.
 */
export type OverflowPolicy = 'drop-oldest' | 'drop-newest' | 'close';

/**
 * What a listen request asks for (spec §1): every field optional and opt-in. `taskIds` needs the
 * Tasks extension, which `listen()` declares by itself.
 */
export interface ListenFilter {
  readonly toolsListChanged?: boolean;
  readonly promptsListChanged?: boolean;
  readonly resourcesListChanged?: boolean;
  /** Absolute URIs whose `notifications/resources/updated` you want. */
  readonly resourceSubscriptions?: readonly string[];
  /** Task ids whose `notifications/tasks` you want (Tasks extension). */
  readonly taskIds?: readonly string[];
}

/** Request headers: names in any case, string values. */
export type ListenHeaders = Readonly<Record<string, string>>;

/** The part of a `fetch` response the client reads. The global `Response` is one. */
export interface FetchResponse {
  readonly status: number;
  readonly statusText?: string;
  readonly headers: { get(name: string): string | null };
  readonly body: {
    getReader(): {
      read(): Promise<{ done: boolean; value?: Uint8Array }>;
      cancel(reason?: unknown): Promise<void>;
    };
  } | null;
}

/** The `init` the client hands `fetch`. */
export interface FetchInit {
  readonly method: 'POST';
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly signal: AbortSignal;
}

/** A `fetch` the client can use: the global one, undici's, or a wrapper of either. */
export type FetchLike = (url: string, init: FetchInit) => Promise<FetchResponse>;

/** Reconnection after a stream ended without the caller asking (see {@link ListenOptions.reconnect}). */
export interface ReconnectOptions {
  /**
   * The first backoff step, in milliseconds (1 to 2147483647). The delay before attempt `n` is drawn
   * at random between 0 and `min(maxDelayMs, initialDelayMs × 2^(n-1))` ("full jitter"), and is never
   * shorter than a `Retry-After` the server sent.
   * @default 500
   */
  readonly initialDelayMs?: number;
  /** The longest backoff step, in milliseconds (1 to 2147483647; a `Retry-After` may ask for longer). @default 30000 */
  readonly maxDelayMs?: number;
  /**
   * Attempts in a row (a positive integer) before giving up, which ends the subscription with the reason
   * `'lost'` and the last failure as `subscription.error`; or `false` to try for ever. Counted afresh
   * after each successful re-listen.
   * @default false
   */
  readonly maxAttempts?: number | false;
}

/** Options of {@link listen}. Unknown keys are refused. */
export interface ListenOptions {
  /**
   * Headers added to the request (your auth: `{ authorization: 'Bearer …' }`), or a function that
   * returns them, called before every attempt (a token that expires between re-listens). They may not
   * set `Content-Type`, `Accept`, `MCP-Protocol-Version` or `Mcp-Method`: the client sets those from
   * the request it sends.
   * @default none
   */
  readonly headers?: ListenHeaders | (() => ListenHeaders | PromiseLike<ListenHeaders>);
  /**
   * The JSON-RPC id of the request, hence the subscription id every message of the stream carries
   * (a string or a finite number). Re-listens use the same id.
   * @default a fresh `listen-<uuid>`
   */
  readonly id?: RequestId;
  /**
   * The `fetch` to send the request with: pass undici's with a dispatcher of your own (a proxy, TLS
   * options, or no body timeout: Node's own fetch gives up on a body silent for 5 minutes, which
   * keepalive comments prevent).
   * @default globalThis.fetch
   */
  readonly fetch?: FetchLike;
  /**
   * Most notifications held for a consumer that does not keep up (a positive integer): a bound that
   * holds a burst.
   * @default 100
   */
  readonly maxBuffer?: number;
  /**
   * Most bytes one event of the stream may take (a positive integer): its `data`, or a line that has
   * not ended yet. A stream that sends more ends as `'lost'`, with `ErrorCode.ListenEventTooLarge` (as
   * `subscription.error` when re-listening is off; `listen()` rejects with it when the acknowledgement
   * is the event), so that a server can never grow the client's memory without end. Notifications are
   * small; the acknowledgement repeats the honoured part of the filter, so it grows with the listen body,
   * which this package's servers accept up to 4 MiB by default (`maxBodyBytes`, as the official SDK's).
   * @default 4194304 (4 MiB)
   */
  readonly maxEventBytes?: number;
  /**
   * What a full buffer does with one more notification: `'drop-oldest'` forgets the oldest held,
   * `'drop-newest'` forgets the new one, `'close'` ends the subscription with the reason `'overflow'`
   * (after what it holds). Drops are counted in a `dropped` item, where they happened.
   * @default 'drop-oldest'
   */
  readonly overflow?: OverflowPolicy;
  /**
   * Aborts the listen request (`listen()` rejects with `ErrorCode.ListenAborted`), or, once it was
   * acknowledged, closes the subscription as `close()` does.
   */
  readonly signal?: AbortSignal;
  /**
   * Listen again, by itself, when the stream ends without the caller asking: after `'lost'` (the stream
   * broke), and after `'complete'` while the honoured filter was not empty (a server shutting down
   * completes its streams; the next instance will serve the same filter). Attempts back off with
   * jitter, honour `Retry-After`, and retry network errors, 5xx, 429 and JSON-RPC -32603 answers; any
   * other refusal ends the subscription with the reason `'refused'`. After each successful re-listen a
   * `gap` item tells the consumer that events may have been missed meanwhile. `true` takes the
   * defaults of {@link ReconnectOptions}. The first `listen()` is never retried: it rejects.
   * @default false
   */
  readonly reconnect?: boolean | ReconnectOptions;
  /**
   * `_meta["io.modelcontextprotocol/clientCapabilities"]` of the request. When the filter has
   * `taskIds`, the Tasks extension (`extensions["io.modelcontextprotocol/tasks"]`) is added if missing.
   * @default {}
   */
  readonly clientCapabilities?: Readonly<Record<string, unknown>>;
  /**
   * How long to wait for the acknowledgement, in milliseconds (1 to 2147483647), or `false` for as long
   * as it takes. Counts from the moment the request is sent; the server's authorization of your URIs
   * happens within it.
   * @default 30000
   */
  readonly ackTimeoutMs?: number | false;
  /**
   * How long an acknowledged stream may stay silent, in milliseconds (1 to 2147483647), or `false` for
   * ever. Servers send a keepalive comment when they have nothing else to send (this package's every
   * 15 s by default, the official SDK's too); a stream that sends nothing at all for this long is taken
   * as gone (a host that died, a network that dropped it without a word, where no connection reset
   * ever arrives) and ends as `'lost'` with `ErrorCode.ListenIdleTimeout` (re-listened with
   * `reconnect`). Set it above the server's keepalive period, or `false` for a server that sends none.
   * @default 45000
   */
  readonly idleTimeoutMs?: number | false;
}

/** Options of {@link ListenSubscription.waitFor}. */
export interface WaitForOptions {
  /**
   * How long to wait, in milliseconds (1 to 2147483647), or `false` for ever. Below jest's default test
   * timeout (5 s), so that a failing test reports what arrived instead.
   * @default 3000
   */
  readonly timeoutMs?: number | false;
}

/** Notifications the buffer let go, in place of them: `count` in a row (see `maxBuffer`, `overflow`). */
export interface DroppedItem {
  readonly type: 'dropped';
  readonly count: number;
}

/**
 * A re-listen succeeded after the stream ended (`reason`): events published meanwhile are lost, so
 * re-read the state you follow. `honored` is what the new stream honours (it may differ: a URI you may
 * no longer read is gone).
 */
export interface GapItem {
  readonly type: 'gap';
  readonly reason: 'lost' | 'complete';
  readonly honored: NotificationFilter;
  /** Attempts it took. */
  readonly attempts: number;
}

/** The last item: the subscription is over; the iterator finishes after it. */
export interface EndItem {
  readonly type: 'end';
  readonly reason: EndReason;
  /** For `'refused'`, and `'lost'` after re-listening gave up: the last failure. */
  readonly error?: ListenError;
}

/** What iterating a subscription yields, in the order it happened. */
export type SubscriptionItem = NotificationItem | DroppedItem | GapItem | EndItem;

/** What `waitFor()` looks for: a method name, or a predicate over notifications. */
export type NotificationMatch = string | ((notification: NotificationItem) => boolean);
