/**
 * One listen response: SSE headers, the acknowledgement, events written one at a time under socket
 * backpressure, keepalives, and exactly-once teardown. The only writer of SSE bytes.
 */
import type { NotificationFilter, RequestId } from './events.ts';
import { KEEPALIVE_FRAME, SSE_HEADERS, type SplitFrame } from './sse.ts';
import { StreamQueue, type OverflowPolicy, type QueueOutcome } from './stream-queue.ts';

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
  readonly socket?: { setNoDelay?(noDelay?: boolean): unknown } | null;
}

/** Why a stream ended. */
export type CloseReason =
  /** The client closed the response (HTTP cancellation, spec §4). */
  | 'client'
  /** The client posted `notifications/cancelled` for it. */
  | 'cancelled'
  /** The server completed it gracefully (`hub.complete()`, shutdown). */
  | 'complete'
  /** Nothing of the filter was honoured: acknowledged, then completed at once. */
  | 'empty'
  /** Its queue overflowed under the `'close'` policy. */
  | 'overflow';

/** Counters a stream adds to; owned by its hub. */
export interface StreamCounters {
  written: number;
  coalesced: number;
  dropped: number;
  /** Ending streams whose client did not read their last frames in time, so were cut off. */
  cutOff: number;
}

/** What a stream is made of. It keeps nothing of the request but these. */
export interface StreamInit {
  readonly id: RequestId;
  readonly principal: string;
  /** The honoured filter, as acknowledged. */
  readonly filter: NotificationFilter;
  readonly keepAliveMs: number | false;
  readonly maxBuffer: number;
  readonly overflow: OverflowPolicy;
  /** How long a graceful end may wait for a client that does not read before cutting it off. */
  readonly endTimeoutMs: number;
  /** The acknowledgement frame, written first. */
  readonly ackFrame: string;
  /** The terminal result frame, written on a graceful end. */
  readonly resultFrame: string;
  readonly counters: StreamCounters;
  /** Called exactly once, as soon as the stream stops accepting events. */
  readonly onClose: (stream: ListenStream, reason: CloseReason) => void;
  /** Called when the queue overflows, before the policy acts. */
  readonly onOverflow: (stream: ListenStream) => void;
}

/** What happened to one event offered to a stream. */
export type DeliverOutcome = 'written' | QueueOutcome | 'closed';

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

  private readonly res: StreamResponse;
  private readonly init: StreamInit;
  private state = OPEN;
  /** True from a `write()` that returned false until `'drain'`. */
  private blocked = false;
  private queue: StreamQueue | undefined;
  private keepAlive: NodeJS.Timeout | undefined;
  private endTimer: NodeJS.Timeout | undefined;
  private endRequested = false;
  private keepQueueOnEnd = false;
  private finished: Promise<void> | undefined;
  private resolveFinished: (() => void) | undefined;

  constructor(res: StreamResponse, init: StreamInit) {
    this.res = res;
    this.init = init;
    this.id = init.id;
    this.idJson = JSON.stringify(init.id);
    this.principal = init.principal;
    this.filter = init.filter;
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
   * Writes the headers and the acknowledgement, and starts watching the connection. The hub registers
   * the stream only after this returns: the ack must be on the wire before any event may follow it.
   */
  open(): void {
    this.res.socket?.setNoDelay?.(true);
    this.res.writeHead(200, { ...SSE_HEADERS });
    this.res.on('close', this.onResponseClose);
    this.write(this.init.ackFrame);
    if (this.init.keepAliveMs !== false) {
      this.keepAlive = setInterval(this.onKeepAlive, this.init.keepAliveMs);
      this.keepAlive.unref();
    }
  }

  /** Offers one event, serialized once per publish with a hole for this stream's id. */
  deliver(frame: SplitFrame, key: string): DeliverOutcome {
    if (this.state !== OPEN) return 'closed';
    const text = frame.head + this.idJson + frame.tail;
    if (!this.blocked) {
      this.init.counters.written++;
      this.write(text);
      return 'written';
    }
    this.queue ??= new StreamQueue(this.init.maxBuffer, this.init.overflow);
    const outcome = this.queue.push(key, text);
    switch (outcome) {
      case 'coalesced':
        this.init.counters.coalesced++;
        break;
      case 'dropped':
      case 'dropped-oldest':
        this.init.counters.dropped++;
        this.init.onOverflow(this);
        break;
      case 'overflow':
        this.init.counters.dropped++;
        this.init.onOverflow(this);
        void this.end('overflow', false, this.init.endTimeoutMs);
        break;
      case 'queued':
        break;
    }
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
    if (!keepQueue && this.queue !== undefined) this.init.counters.dropped += this.queue.clear();
    this.init.onClose(this, reason);
    if (!this.blocked) this.flush();
    else if (timeoutMs > 0) {
      this.endTimer = setTimeout(() => {
        this.init.counters.cutOff++;
        this.teardown();
      }, timeoutMs);
      this.endTimer.unref();
    }
    return this.finished;
  }

  /** Drops the stream without writing anything more (cancellation, spec §4). */
  cancel(reason: 'client' | 'cancelled'): void {
    if (this.state === OPEN) {
      this.state = ENDING;
      this.init.onClose(this, reason);
    }
    this.teardown();
    if (!this.res.writableEnded && !this.res.destroyed) this.res.destroy();
  }

  private write(text: string): void {
    if (!this.res.write(text)) {
      this.blocked = true;
      this.res.once('drain', this.onDrain);
    }
  }

  private flush(): void {
    const queue = this.queue;
    // 64 frames per write: fewer syscalls than one per frame, without building one huge string.
    while (!this.blocked && queue !== undefined && queue.size > 0 && (this.state === OPEN || this.keepQueueOnEnd)) {
      const { text, count } = queue.take(64);
      this.init.counters.written += count;
      this.write(text);
    }
    if (!this.blocked && this.endRequested && this.state === ENDING) {
      this.res.end(this.init.resultFrame);
      this.teardown();
    }
  }

  private readonly onDrain = (): void => {
    this.blocked = false;
    this.flush();
  };

  private readonly onKeepAlive = (): void => {
    if (!this.blocked && this.state === OPEN) this.write(KEEPALIVE_FRAME);
  };

  private readonly onResponseClose = (): void => {
    if (this.state === OPEN) this.cancel('client');
    else this.teardown();
  };

  private stopKeepAlive(): void {
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  /** Frees everything; runs once whatever path got here. */
  private teardown(): void {
    if (this.state === CLOSED) return;
    this.state = CLOSED;
    this.stopKeepAlive();
    if (this.endTimer !== undefined) clearTimeout(this.endTimer);
    this.queue?.clear();
    this.queue = undefined;
    this.res.removeListener('close', this.onResponseClose);
    this.res.removeListener('drain', this.onDrain);
    if (!this.res.writableEnded && !this.res.destroyed) this.res.destroy();
    this.resolveFinished?.();
  }
}
