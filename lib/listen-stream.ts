/**
 * One listen response: SSE headers, the acknowledgement, events batched per tick and written under
 * socket backpressure, keepalives, and exactly-once teardown. The only writer of SSE bytes.
 */
import { OutgoingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { KEEPALIVE_FRAME, SSE_HEADERS, type SplitFrame } from './sse.ts';
import { StreamQueue, type QueueOutcome } from './stream-queue.ts';
import type { CloseReason, InterestLease, NotificationFilter, RequestId } from './types.ts';

/**
 * The part of Node's `ServerResponse` a stream uses. Adapters hand the raw response of their
 * framework (Express's `res`, Fastify's `reply.raw`, Nest's underlying response).
 */
export interface StreamResponse {
  writeHead(statusCode: number, headers: Record<string, string>): unknown;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  on(event: 'drain' | 'close', listener: () => void): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close', listener: () => void): unknown;
  destroy(): unknown;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  readonly headersSent: boolean;
  /**
   * Bytes written but not yet handed to the operating system. After the terminal result, a response
   * that still holds some is watched until it closes, within `completeTimeoutMs`, then destroyed.
   * A response without it is taken to have sent everything.
   */
  readonly writableLength?: number;
  readonly socket?: { setNoDelay?(noDelay?: boolean): unknown } | null;
}

/** Counters a stream adds to; owned by its hub. */
export interface StreamCounters {
  written: number;
  coalesced: number;
  dropped: number;
  /** Ending streams whose client did not read their last frames in time, so were cut off. */
  cutOff: number;
}

/**
 * What every stream of one hub shares: bounds, counters and callbacks, the end-of-tick flush and the
 * keepalive clocks. One object per hub, so that an open stream holds a reference, not a copy.
 */
export interface StreamShared {
  /** How long a graceful end may wait for a client that does not read before cutting it off. */
  readonly endTimeoutMs: number;
  /** How long an open stream may stay blocked (accepting no byte) before it is closed as stalled. */
  readonly stallTimeoutMs: number | false;
  readonly counters: StreamCounters;
  /** Called exactly once, as soon as the stream stops accepting events; with what a write threw for `'failed'`. */
  readonly onClose: (stream: ListenStream, reason: CloseReason, error?: unknown) => void;
  /** Writes the stream's batch at the end of this tick (see {@link TickFlush}). */
  readonly flush: TickFlush;
  /** The keepalive clocks, one per interval (see {@link KeepAliveClocks}). */
  readonly keepAlive: KeepAliveClocks;
}

/** What one stream is made of. It keeps nothing of the request but these. */
export interface StreamInit {
  readonly id: RequestId;
  readonly principal: string;
  /** The honoured filter, as acknowledged. */
  readonly filter: NotificationFilter;
  readonly keepAliveMs: number | false;
  /** Builds the terminal result frame (from the id as JSON), written on a graceful end. */
  readonly resultFrame: (idJson: string) => string;
}

/**
 * The end-of-tick flush of one hub: the streams that batched frames in this tick, written by one
 * microtask for all of them, not one per stream (a microtask and a closure per stream per tick is
 * most of what a one-event fan-out costs beside the write itself).
 */
export class TickFlush {
  private streams: ListenStream[] = [];

  /** Adds `stream` to this tick's batch; the first addition of a tick schedules the flush. */
  add(stream: ListenStream): void {
    if (this.streams.push(stream) === 1) queueMicrotask(this.run);
  }

  private readonly run = (): void => {
    const streams = this.streams;
    this.streams = [];
    for (let i = 0; i < streams.length; i++) (streams[i] as ListenStream).flushBatch();
  };
}

/**
 * One interval timer per keepalive period for all of a hub's streams, instead of a timer and a closure
 * per stream. A clock starts with its first stream and stops with its last, so the first stream of a
 * clock gets its first keepalive `keepAliveMs` after it opened; a later one within `keepAliveMs`
 * (never later), then every `keepAliveMs`.
 */
export class KeepAliveClocks {
  private readonly clocks = new Map<number, { readonly timer: NodeJS.Timeout; readonly streams: Set<ListenStream> }>();

  join(stream: ListenStream, ms: number): void {
    const clock = this.clocks.get(ms);
    if (clock !== undefined) {
      clock.streams.add(stream);
      return;
    }
    const streams = new Set([stream]);
    const timer = setInterval(() => {
      for (const member of streams) member.keepAliveTick();
    }, ms);
    timer.unref();
    this.clocks.set(ms, { timer, streams });
  }

  leave(stream: ListenStream, ms: number): void {
    const clock = this.clocks.get(ms);
    if (clock === undefined || !clock.streams.delete(stream) || clock.streams.size > 0) return;
    clearInterval(clock.timer);
    this.clocks.delete(ms);
  }
}

/** The shortest fraction of `maxStreamDurationMs` a stream lives: its lifetime is drawn uniformly from [0.75, 1] × it. */
export const LIFETIME_JITTER_FLOOR = 0.75;

/**
 * A stream's lifetime under `maxStreamDurationMs`: drawn uniformly between 0.75 and 1 times it (never
 * more: the option is a limit a platform may enforce). `random` is `Math.random`'s contract, in [0, 1).
 */
export function streamLifetimeMs(maxMs: number, random: () => number = Math.random): number {
  return maxMs * (LIFETIME_JITTER_FLOOR + (1 - LIFETIME_JITTER_FLOOR) * random());
}

/**
 * The granularity of a {@link LifetimeClock}: 1 % of the limit, from 10 ms to 1 s. Fine enough that
 * the ends stay spread (a quarter of the limit holds 25 or more ticks), coarse enough that a hub pays
 * at most one timer callback per tick however many streams it holds.
 */
export function lifetimeTickMs(maxMs: number): number {
  return Math.min(1000, Math.max(10, Math.floor(maxMs / 100)));
}

/**
 * `maxStreamDurationMs` for all of a hub's streams: one interval timer (while any stream is held) and
 * buckets of streams by the tick they end at, instead of a timer and a closure per stream. A stream
 * ends in the tick before its drawn lifetime runs out, so never after it: between its lifetime minus
 * two ticks and its lifetime (plus the event loop's own lateness). Only a hub with the option set has
 * one; the streams themselves hold nothing of it.
 */
export class LifetimeClock {
  /** Streams by the tick (time / tick, rounded down) in which they end. */
  private readonly buckets = new Map<number, Set<ListenStream>>();
  /** Which bucket each held stream is in, so that a stream that closes early leaves it at once. */
  private readonly bucketOf = new Map<ListenStream, Set<ListenStream>>();
  private timer: NodeJS.Timeout | undefined;
  /** The last tick whose bucket was ended. */
  private done = 0;
  private readonly tickMs: number;

  constructor(
    private readonly maxMs: number,
    /** Ends one stream whose time is up (gracefully: it may stay open a moment, then it leaves). */
    private readonly expire: (stream: ListenStream) => void,
    private readonly random: () => number = Math.random,
  ) {
    this.tickMs = lifetimeTickMs(maxMs);
  }

  join(stream: ListenStream): void {
    const now = performance.now();
    if (this.timer === undefined) {
      this.done = Math.floor(now / this.tickMs);
      this.timer = setInterval(this.tick, this.tickMs);
      this.timer.unref();
    }
    // One tick early: a tick runs up to one tick after its start, and the limit must hold.
    const at = Math.max(this.done + 1, Math.floor((now + streamLifetimeMs(this.maxMs, this.random)) / this.tickMs) - 1);
    let bucket = this.buckets.get(at);
    if (bucket === undefined) this.buckets.set(at, (bucket = new Set()));
    bucket.add(stream);
    this.bucketOf.set(stream, bucket);
  }

  leave(stream: ListenStream): void {
    const bucket = this.bucketOf.get(stream);
    if (bucket === undefined) return;
    this.bucketOf.delete(stream);
    bucket.delete(stream);
    // An empty bucket is left for its tick to drop: finding its key again costs more than it holds.
    if (this.bucketOf.size === 0) this.stop();
  }

  /** Stops the clock and forgets every stream (the hub closed). */
  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.buckets.clear();
    this.bucketOf.clear();
  }

  private readonly tick = (): void => {
    const due = Math.floor(performance.now() / this.tickMs);
    const ending: ListenStream[] = [];
    // A timer held back (a busy loop, a suspended machine) catches up on every tick it missed.
    const take = (key: number): void => {
      const bucket = this.buckets.get(key);
      if (bucket === undefined) return;
      this.buckets.delete(key);
      for (const stream of bucket) {
        this.bucketOf.delete(stream);
        ending.push(stream);
      }
    };
    if (due - this.done <= this.buckets.size) for (let key = this.done + 1; key <= due; key++) take(key);
    else for (const key of [...this.buckets.keys()]) if (key <= due) take(key);
    this.done = due;
    for (const stream of ending) this.expire(stream);
    if (this.bucketOf.size === 0) this.stop();
  };
}

/**
 * Which stream a response (and, when it writes to it directly, a socket) belongs to: the `'close'` and
 * `'drain'` listeners are shared functions.
 */
const streamOf = new WeakMap<object, ListenStream>();

function onResponseClose(this: StreamResponse): void {
  streamOf.get(this)?.responseClosed();
}

function onResponseDrain(this: StreamResponse | Socket): void {
  streamOf.get(this)?.drained();
}

/**
 * The socket a stream may write its frames to itself, as HTTP/1.1 chunks, instead of through
 * `res.write()`; or `undefined` to keep writing through the response.
 *
 * Why: a framework that swaps a response's prototype and then adds properties (Express does, for every
 * request) gives each response a hidden class of its own. Node's write path then reads a dozen
 * properties from a thousand different shapes, and its inline caches stop working: measured, a write
 * through an Express response cost several times one through a plain `node:http` response, and when
 * each event comes from its own request (no two in one tick) that was most of a delivery's cost. The
 * socket is Node's own object, of one shape for every connection.
 *
 * Only when nothing else needs to see the bytes: a plain `node:http` response (not HTTP/2's
 * compatibility layer), whose `write` and `end` nobody wrapped (a compression or logging middleware
 * must see every byte), already sending chunked, its headers out and nothing of its own buffered.
 */
function directSocket(res: StreamResponse): Socket | undefined {
  if (!(res instanceof ServerResponse)) return undefined;
  if (res.write !== OutgoingMessage.prototype.write || res.end !== OutgoingMessage.prototype.end) return undefined;
  const socket = res.socket;
  if (socket === null || !res.chunkedEncoding || !res.headersSent || res.writableLength !== socket.writableLength) {
    return undefined;
  }
  return socket;
}

/**
 * Closes the connection of a client that takes no byte (a stalled stream, or one cut off while ending)
 * with a TCP reset. A plain close hands the unsent bytes to the kernel, which keeps the socket in
 * FIN-WAIT-1 with its whole send buffer for as long as the client's kernel answers its zero-window
 * probes (minutes, measured on Linux; up to 4 MiB each on loopback): a thousand stopped readers closed
 * by the stall timeout still held their buffers. A reset frees them at once, and the client, which
 * reads nothing, loses nothing it would have read. Only the TCP socket of a plain HTTP/1 response: a
 * TLS socket cannot be reset (Node throws), and HTTP/2's compatibility layer shares its socket.
 */
function resetConnection(res: StreamResponse): void {
  const socket = res instanceof ServerResponse ? res.socket : null;
  if (socket instanceof Socket && !socket.destroyed) {
    try {
      socket.resetAndDestroy();
    } catch {
      // Not a TCP handle (TLS): destroyed below as before.
    }
  }
  if (!res.destroyed) res.destroy();
}

/** What happened to one event offered to a stream. */
export type DeliverOutcome = 'written' | QueueOutcome | 'closed';

/** A tick's batch is written early once it reaches this many characters (16 KiB, a socket's high-water mark). */
const PENDING_FLUSH_CHARS = 16_384;

const OPEN = 0;
const ENDING = 1;
const CLOSED = 2;

/** One open listen response. Created by the hub; host code never constructs one. */
export class ListenStream {
  /** The listen request id: the stream's subscription id. */
  readonly id: RequestId;
  /** The id as JSON, spliced into every frame. */
  readonly idJson: string;
  readonly principal: string;
  readonly filter: NotificationFilter;
  /** The bus's hold on what it follows, released by the hub when it closes (a bus that routes by interest). */
  lease: InterestLease | undefined = undefined;

  private readonly res: StreamResponse;
  /** Set when frames go to the socket as chunks of their own (see {@link directSocket}). */
  private socket: Socket | undefined;
  private readonly shared: StreamShared;
  private readonly keepAliveMs: number | false;
  private readonly resultFrame: (idJson: string) => string;
  private state = OPEN;
  /** True from a `write()` that returned false until `'drain'`. */
  private blocked = false;
  private queue: StreamQueue | undefined;
  private endTimer: NodeJS.Timeout | undefined;
  /**
   * Armed when the stream becomes blocked; created once and refreshed on each later block, never
   * cleared on drain (it finds the stream unblocked and does nothing): no timer churn per write.
   */
  private stallTimer: NodeJS.Timeout | undefined;
  private endRequested = false;
  /** Frames delivered during the current tick, written as one `write()` at its end. */
  private pending = '';
  private keepQueueOnEnd = false;
  private finished: Promise<void> | undefined;
  private resolveFinished: (() => void) | undefined;

  constructor(res: StreamResponse, init: StreamInit, shared: StreamShared) {
    this.res = res;
    this.shared = shared;
    this.id = init.id;
    this.idJson = JSON.stringify(init.id);
    this.principal = init.principal;
    this.filter = init.filter;
    this.keepAliveMs = init.keepAliveMs;
    this.resultFrame = init.resultFrame;
  }

  /** Events waiting for the socket to drain. */
  get queued(): number {
    return this.queue?.size ?? 0;
  }

  /** Whether the stream still accepts events. */
  get isOpen(): boolean {
    return this.state === OPEN;
  }

  /**
   * Writes the headers and starts watching the connection. Throws what `writeHead` throws (host
   * middleware already sent headers): then nothing was attached, and the stream is dropped unopened.
   */
  open(): void {
    this.res.socket?.setNoDelay?.(true);
    this.res.writeHead(200, { ...SSE_HEADERS });
    streamOf.set(this.res, this);
    this.res.on('close', onResponseClose);
    // One 'drain' listener for the stream's life, on what it writes to: a `once` per block would
    // allocate a wrapper each time a socket pushes back.
    this.res.on('drain', onResponseDrain);
  }

  /**
   * Writes the acknowledgement, the stream's first frame, after {@link open}. The hub registers the
   * stream only after this returns, and only if it is still open: the ack must be on the wire before
   * any event may follow it, and a write that throws has closed the stream as `failed` (`onClose`
   * ran) before it was ever registered. The ack is a parameter, not kept: with a thousand URIs it is
   * large, and it is written once.
   */
  acknowledge(ackFrame: string): void {
    this.write(ackFrame);
    // Closed by the write: nothing to start (a keepalive clock joined now would hold it for ever).
    if (this.state !== OPEN) return;
    // Decided after the ack went through the response: its headers are out with it.
    if (!this.blocked) {
      this.socket = directSocket(this.res);
      if (this.socket !== undefined) {
        streamOf.set(this.socket, this);
        this.res.removeListener('drain', onResponseDrain);
        this.socket.on('drain', onResponseDrain);
      }
    }
    if (this.keepAliveMs !== false) this.shared.keepAlive.join(this, this.keepAliveMs);
  }

  /** Offers one event, serialized once per publish with a hole for this stream's id. */
  deliver(frame: SplitFrame, key: string): DeliverOutcome {
    if (this.state !== OPEN) return 'closed';
    if (!this.blocked) {
      this.shared.counters.written++;
      // A burst of publishes in one tick becomes one write per stream at the end of the tick: each
      // ServerResponse.write() is costly (chunk framing, corking), a string append is not. The bound
      // keeps the batch within a socket's high-water mark, so backpressure still sees every byte.
      if (this.pending === '') this.shared.flush.add(this);
      this.pending += frame.head + this.idJson + frame.tail;
      if (this.pending.length >= PENDING_FLUSH_CHARS) this.flushBatch();
      return 'written';
    }
    // One entry per key the filter follows: the latest state of every key survives however long the
    // socket pushes back (nothing is dropped unseen), and the stall timeout bounds how long that is.
    this.queue ??= new StreamQueue();
    const outcome = this.queue.push(key, frame);
    if (outcome === 'coalesced') this.shared.counters.coalesced++;
    return outcome;
  }

  /**
   * Ends the stream gracefully: stops accepting events at once (the hub frees its slot), writes what is
   * queued when `keepQueue`, then the terminal result, then ends the response. A client that does not
   * read within `timeoutMs` is cut off. Resolves once the response is closed.
   */
  end(reason: CloseReason, keepQueue: boolean, timeoutMs: number): Promise<void> {
    if (this.state !== OPEN) return this.finished ?? Promise.resolve();
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
    this.state = ENDING;
    this.stopKeepAlive();
    this.endRequested = true;
    this.keepQueueOnEnd = keepQueue;
    if (!keepQueue && this.queue !== undefined) this.shared.counters.dropped += this.queue.clear();
    this.shared.onClose(this, reason);
    this.flush();
    // Still blocked (before, or by the batch just written): wait for drain, within bounds.
    if (this.blocked && this.state === ENDING) this.armEndTimer(timeoutMs);
    return this.finished;
  }

  /** Drops the stream without writing anything more (cancellation, spec §4). */
  cancel(reason: 'client' | 'cancelled'): void {
    this.stop(reason);
  }

  /** Ends the stream at once, without its result: counted under `reason` if it was open. */
  private stop(reason: 'client' | 'cancelled' | 'failed', error?: unknown): void {
    if (this.state === OPEN) {
      this.state = ENDING;
      this.shared.onClose(this, reason, error);
    }
    // Destroys the response unless it ended; nothing more is written.
    this.teardown();
  }

  /** Writes this tick's batch: at the end of the tick, or at once past the bound. For {@link TickFlush}. */
  flushBatch(): void {
    const text = this.pending;
    if (text === '') return;
    this.pending = '';
    if (this.state !== CLOSED) this.write(text);
  }

  /** The socket took everything: write what waited. For the shared `'drain'` listener. */
  drained(): void {
    // A drain this stream did not wait for (the response's own last write): nothing to do.
    if (!this.blocked) return;
    this.blocked = false;
    this.flush();
  }

  /** The response closed (the client left, or the end completed). For the shared `'close'` listener. */
  responseClosed(): void {
    if (this.state === OPEN) this.cancel('client');
    else this.teardown();
  }

  /** A keepalive period passed. For {@link KeepAliveClocks}. */
  keepAliveTick(): void {
    // A batch about to be written keeps the connection alive anyway; a keepalive must not overtake it.
    if (!this.blocked && this.state === OPEN && this.pending === '') this.write(KEEPALIVE_FRAME);
  }

  private write(text: string): void {
    const socket = this.socket;
    if (socket !== undefined) {
      // One chunk, framed as Node frames a response's: its size in hex, CRLF, the bytes, CRLF.
      if (socket.write(`${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`)) return;
    } else {
      // Node's own write never throws here (a failure comes as an 'error' event); a write wrapped by a
      // middleware may. Caught here, so that it ends this stream only, not the fan-out or the tick's
      // flush of every other stream, nor the host's publish() call that may have caused it.
      let accepted: boolean;
      try {
        accepted = this.res.write(text);
      } catch (error) {
        // A write threw: the response cannot be trusted with another byte.
        this.stop('failed', error);
        return;
      }
      if (accepted) return;
    }
    this.blocked = true;
    if (this.shared.stallTimeoutMs !== false) this.armStall(this.shared.stallTimeoutMs);
  }

  /** Starts the stall clock at this block; only on the refused write, never per accepted one. */
  private armStall(timeoutMs: number): void {
    if (this.stallTimer === undefined) {
      // A closure made here, on the first block only: a stream that keeps up never pays for one.
      this.stallTimer = setTimeout(() => this.onStall(), timeoutMs);
      this.stallTimer.unref();
    } else {
      this.stallTimer.refresh();
    }
  }

  private onStall(): void {
    // Drained since this block: the timer is left to lapse (a later block refreshes it). An ending
    // stream is bounded by its own end timer.
    if (!this.blocked || this.state !== OPEN) return;
    this.state = ENDING;
    if (this.queue !== undefined) this.shared.counters.dropped += this.queue.clear();
    this.shared.onClose(this, 'stalled');
    // Nothing more is written: the client reads nothing. A reset frees the socket's buffers.
    resetConnection(this.res);
    this.teardown();
  }

  private flush(): void {
    // Frames batched in this tick precede anything queued later (the queue only fills while blocked,
    // and a batch only grows while not).
    if (!this.blocked) this.flushBatch();
    const queue = this.queue;
    // 64 frames per write: fewer syscalls than one per frame, without building one huge string. And
    // no more than a tick's batch may hold (16 KiB and a frame): a write the socket refuses stays in
    // memory, and frames carry the listen id, which may be long (ids of 16 KiB made 64 frames 1 MiB).
    while (!this.blocked && queue !== undefined && queue.size > 0 && (this.state === OPEN || this.keepQueueOnEnd)) {
      const { text, count } = queue.take(64, this.idJson, PENDING_FLUSH_CHARS);
      this.shared.counters.written += count;
      this.write(text);
    }
    if (!this.blocked && this.endRequested && this.state === ENDING) {
      this.endRequested = false;
      try {
        this.res.end(this.resultFrame(this.idJson));
      } catch (error) {
        // A write threw: the response cannot be trusted with another byte.
        this.stop('failed', error);
        return;
      }
      // The socket took the result, but may still hold it behind bytes a client that stopped reading
      // never took: the graceful end stays bounded until the response closes ('close' follows
      // 'finish'), or a stopped reader would keep the connection, and the HTTP server open, for ever.
      if ((this.res.writableLength ?? 0) > 0 && !this.res.destroyed) {
        this.armEndTimer(this.shared.endTimeoutMs);
        return;
      }
      this.teardown();
    }
  }

  /** Bounds a graceful end: a client that has not taken everything within `timeoutMs` is cut off. */
  private armEndTimer(timeoutMs: number): void {
    if (this.endTimer !== undefined || timeoutMs <= 0) return;
    this.endTimer = setTimeout(() => {
      this.shared.counters.cutOff++;
      // Reset even when ended: an ended response whose bytes never left still holds its socket.
      resetConnection(this.res);
      this.teardown();
    }, timeoutMs);
    this.endTimer.unref();
  }

  private stopKeepAlive(): void {
    if (this.keepAliveMs !== false) this.shared.keepAlive.leave(this, this.keepAliveMs);
  }

  /** Frees everything; runs once whatever path got here. */
  private teardown(): void {
    if (this.state === CLOSED) return;
    this.state = CLOSED;
    this.stopKeepAlive();
    if (this.endTimer !== undefined) clearTimeout(this.endTimer);
    if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
    this.queue?.clear();
    this.queue = undefined;
    this.pending = '';
    this.res.removeListener('close', onResponseClose);
    this.res.removeListener('drain', onResponseDrain);
    streamOf.delete(this.res);
    if (this.socket !== undefined) {
      this.socket.removeListener('drain', onResponseDrain);
      streamOf.delete(this.socket);
      this.socket = undefined;
    }
    if (!this.res.writableEnded && !this.res.destroyed) this.res.destroy();
    this.resolveFinished?.();
  }
}
