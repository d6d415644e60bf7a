/**
 * A fake of the part of Node's `ServerResponse` the engine writes to (`StreamResponse`), for unit tests
 * of lib/: the test decides what each `write()` returns and when `'drain'` and `'close'` happen, and
 * reads back exactly the bytes the engine wrote.
 */
import { EventEmitter } from 'node:events';
import {
  hubEngine,
  type Logger,
  type OpenInit,
  type PublishReport,
  type StreamResponse,
  type SubscriptionHub,
} from '../../lib/internal.ts';
import { SseParser, type SseEvent } from './sse.ts';

export class FakeResponse extends EventEmitter implements StreamResponse {
  statusCode: number | undefined;
  headers: Record<string, string> | undefined;
  /** Every chunk passed to `write()` or `end()`, in order. */
  readonly chunks: string[] = [];
  /** Calls that a real response would refuse (a write after end, headers twice). Should stay empty. */
  readonly violations: string[] = [];
  /** What the next `write()` returns: `false` simulates a socket whose buffer is full. */
  accept = true;
  noDelay = false;
  destroyed = false;
  writableEnded = false;
  headersSent = false;
  readonly socket = {
    setNoDelay: (noDelay?: boolean): void => {
      this.noDelay = noDelay !== false;
    },
  };
  private closeEmitted = false;

  writeHead(statusCode: number, headers: Record<string, string> = {}): this {
    if (this.headersSent) {
      // What Node's ServerResponse does.
      throw Object.assign(new Error('Cannot write headers after they are sent to the client'), {
        code: 'ERR_HTTP_HEADERS_SENT',
      });
    }
    this.statusCode = statusCode;
    this.headers = { ...headers };
    this.headersSent = true;
    return this;
  }

  write(chunk: string): boolean {
    if (this.writableEnded || this.destroyed) {
      this.violations.push(`write after ${this.writableEnded ? 'end' : 'destroy'}: ${JSON.stringify(chunk)}`);
      return false;
    }
    if (!this.headersSent) this.violations.push('write before writeHead');
    this.chunks.push(chunk);
    return this.accept;
  }

  end(chunk?: string): this {
    if (this.writableEnded || this.destroyed) {
      this.violations.push('end after end or destroy');
      return this;
    }
    if (chunk !== undefined) this.chunks.push(chunk);
    this.writableEnded = true;
    this.headersSent = true;
    // Node emits 'close' once the response is finished, on a later tick.
    process.nextTick(() => this.emitClose());
    return this;
  }

  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    process.nextTick(() => this.emitClose());
    return this;
  }

  /** The socket buffer emptied: `write()` accepts again and `'drain'` fires. */
  drain(): void {
    this.accept = true;
    this.emit('drain');
  }

  /** The client hung up (HTTP cancellation, spec §4). */
  clientClose(): void {
    this.destroyed = true;
    this.emitClose();
  }

  private emitClose(): void {
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.emit('close');
  }

  /** Everything written so far, as one string. */
  get text(): string {
    return this.chunks.join('');
  }

  /** The SSE events written so far, parsed by the test client's parser. */
  events(): SseEvent[] {
    const events: SseEvent[] = [];
    new SseParser((event) => events.push(event)).feed(this.text);
    return events;
  }

  /** The SSE comment lines written so far. */
  comments(): string[] {
    const comments: string[] = [];
    new SseParser(
      () => {},
      (comment) => comments.push(comment),
    ).feed(this.text);
    return comments;
  }

  /** The JSON-RPC messages written so far. */
  messages(): any[] {
    return this.events().map((event) => event.json);
  }
}

/**
 * A response whose `write()` throws while `armed`, as a write wrapped by a middleware may (a logging or
 * compression middleware with a bug). Armed from the start, the acknowledgement's own write throws.
 */
export class ThrowingResponse extends FakeResponse {
  constructor(public armed = false) {
    super();
  }

  override write(chunk: string): boolean {
    if (this.armed) throw new Error('the wrapped write broke');
    return super.write(chunk);
  }
}

/** Marker frames for hub tests that open streams directly: SSE comments, so events still parse. */
export const ACK_MARKER = ': test-ack\n\n';
export const RESULT_MARKER = ': test-result\n\n';

/** Opens a stream on `res` through the hub's public reservation API, with marker ack and result frames. */
export function openStream(
  hub: SubscriptionHub,
  res: StreamResponse,
  init: Partial<Omit<OpenInit, 'ackFrame' | 'resultFrame'>> & { principal?: string } = {},
) {
  const id = init.id ?? 'sub-1';
  return hubEngine(hub)
    .reserve(init.principal ?? 'alice', id)
    .open(res, {
      id,
      filter: init.filter ?? { toolsListChanged: true },
      keepAliveMs: init.keepAliveMs ?? false,
      ackFrame: ACK_MARKER,
      resultFrame: () => RESULT_MARKER,
    });
}

/**
 * {@link openStream} as the listen engine does it with a bus that routes by interest: tells the bus
 * what the stream follows and waits for it (the bus subscribes) before the stream opens.
 */
export async function openFollowing(
  hub: SubscriptionHub,
  res: StreamResponse,
  init: Partial<Omit<OpenInit, 'ackFrame' | 'resultFrame'>> & { principal?: string } = {},
) {
  const id = init.id ?? 'sub-1';
  const filter = init.filter ?? { toolsListChanged: true };
  const reservation = hubEngine(hub).reserve(init.principal ?? 'alice', id);
  await reservation.follow(filter);
  return reservation.open(res, {
    id,
    filter,
    keepAliveMs: init.keepAliveMs ?? false,
    ackFrame: ACK_MARKER,
    resultFrame: () => RESULT_MARKER,
  });
}

/** What a publish reported, with zeros for what it did not say. */
export function report(partial: Partial<PublishReport>): PublishReport {
  return { matched: 0, written: 0, queued: 0, coalesced: 0, ...partial };
}

/** A logger that records every call, so tests can assert what was (and was not) reported. */
export function recordingLogger(): Logger & { warns: unknown[][]; errors: unknown[][] } {
  const warns: unknown[][] = [];
  const errors: unknown[][] = [];
  return {
    warns,
    errors,
    warn: (message, details) => void warns.push([message, details]),
    error: (message, details) => void errors.push([message, details]),
  };
}

/** The subscription id a message carries in `_meta`. */
export function subscriptionIdOf(message: any): unknown {
  return (
    message?.params?._meta?.['io.modelcontextprotocol/subscriptionId'] ??
    message?.result?._meta?.['io.modelcontextprotocol/subscriptionId']
  );
}

/** Lets pending promise callbacks and next-tick callbacks run (setImmediate is never mocked here). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Waits until `predicate` holds, checking after each turn of the event loop; rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/**
 * Waits, one event-loop turn at a time, until `predicate` holds; for tests with mocked timers, where
 * only setImmediate still runs. Rejects after `turns` turns.
 */
export async function settleUntil(predicate: () => boolean, what: string, turns = 1000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (predicate()) return;
    await settle();
  }
  if (!predicate()) throw new Error(`gave up after ${turns} event-loop turns waiting for ${what}`);
}
