/**
 * A listen response on the web-standard fetch API: the {@link StreamResponse} the engine writes to, over
 * a pull-based `ReadableStream` that becomes the body of the `Response` a fetch handler returns (Hono,
 * Next.js route handlers; Bun and Deno serve the same). The engine and the SSE writer (ListenStream)
 * see Node's response semantics, unchanged: `write()` returns `false` once the stream's queue is full,
 * `'drain'` comes when the runtime pulls again, `'close'` when the client goes (the request's signal,
 * or the runtime cancelling the body), so the hub's coalescing queue and the stall timeout apply as on
 * Node's own response.
 */
import { EventEmitter } from 'node:events';
import type { StreamResponse } from './listen-stream.ts';

/**
 * Bytes the body's queue holds before `write()` returns `false`: 16 KiB, a Node socket's high-water
 * mark, and as much as ListenStream batches in one write.
 */
export const WEB_HIGH_WATER_MARK = 16_384;

/**
 * The status of a response that was destroyed before its head was written: the client left while its
 * listen was being authorized, or cancelled it while it waited to open (spec §4: nothing more is
 * written). A fetch handler must return a response; this one is nginx's "client closed request", and
 * nobody reads it but a client that already gave up on it.
 */
export const CLOSED_BEFORE_HEAD_STATUS = 499;

/**
 * Hop-by-hop headers are the runtime server's to set (HTTP/2, Deno and Bun refuse them on a Response):
 * left out of the head the engine writes.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);

const encoder = new TextEncoder();

/**
 * What an aborted body errors with. A plain error on purpose: a server of fetch handlers answers it by
 * destroying the connection at once, even while it waits for a client that stopped reading to drain
 * (`@hono/node-server` does). Node's premature-close code would spare a log line there, but that server
 * then leaves the connection to the client, and a stalled one holds it, and the HTTP server, for ever.
 */
function aborted(): Error {
  return new Error('mcp-subscriptions: the listen response was aborted');
}

/** One response of the fetch face: written to by the engine, read by the runtime as a `Response`. */
export class WebStreamResponse extends EventEmitter implements StreamResponse {
  headersSent = false;
  destroyed = false;
  writableEnded = false;
  /** No socket: Nagle and resets are the runtime server's business. */
  readonly socket = null;
  /** The `Response`, once the head is written (or the response destroyed before it). */
  readonly response: Promise<Response>;

  private readonly body: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private settle!: (response: Response) => void;
  /** True from a `write()` that returned false until the runtime pulls again (`'drain'`). */
  private blocked = false;
  /** The body stream is closed or errored: nothing more reaches the reader. */
  private bodyDone = false;
  private closeEmitted = false;
  private readonly signal: AbortSignal | undefined;

  /** `signal`: the request's; its abort is the client leaving (`'close'`). */
  constructor(signal?: AbortSignal) {
    super();
    this.response = new Promise((resolve) => (this.settle = resolve));
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => this.pulled(),
        cancel: () => {
          // Cancelled: the stream is closed already, and takes neither close() nor error().
          this.bodyDone = true;
          this.gone();
        },
      },
      new ByteLengthQueuingStrategy({ highWaterMark: WEB_HIGH_WATER_MARK }),
    );
    this.signal = signal;
    if (signal?.aborted) this.gone();
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /**
   * Bytes written that the runtime has not read yet. After the end, a reader that stopped holds the
   * response open until it closes (within the engine's end timeout), as a Node response's unsent bytes do.
   */
  get writableLength(): number {
    if (this.bodyDone) return 0;
    return WEB_HIGH_WATER_MARK - (this.controller.desiredSize ?? WEB_HIGH_WATER_MARK);
  }

  writeHead(statusCode: number, headers: Record<string, string>): this {
    if (this.headersSent) throw new Error('mcp-subscriptions: the response head was already written');
    this.headersSent = true;
    const head = new Headers();
    for (const [name, value] of Object.entries(headers)) {
      if (!HOP_BY_HOP.has(name.toLowerCase())) head.set(name, value);
    }
    // A body-less status cannot carry a stream (the Response constructor refuses it).
    const bodyless = statusCode === 204 || statusCode === 304 || statusCode < 200;
    this.settle(new Response(bodyless ? null : this.body, { status: statusCode, headers: head }));
    return this;
  }

  write(chunk: string): boolean {
    if (this.destroyed || this.writableEnded || this.bodyDone) return false;
    this.controller.enqueue(encoder.encode(chunk));
    if ((this.controller.desiredSize ?? 0) > 0) return true;
    this.blocked = true;
    return false;
  }

  end(chunk?: string): this {
    if (this.writableEnded || this.destroyed) return this;
    if (chunk !== undefined && chunk !== '') this.controller.enqueue(encoder.encode(chunk));
    this.writableEnded = true;
    // Closed once the reader has taken everything (pulled()): until then writableLength counts what it holds.
    if (this.writableLength === 0) this.finish();
    return this;
  }

  /** Aborts the response: the runtime resets the connection (a stalled client, a cancelled listen, a failure). */
  destroy(): this {
    this.stop(true);
    return this;
  }
  /**
   * The response of the request the engine served: `serving` is the engine's promise, which settles
   * after the head is written, or with nothing written at all (the client left first).
   */
  async responseOf(serving: Promise<void>): Promise<Response> {
    await Promise.race([this.response, serving]);
    // The engine finished without a head: nothing was answered, so nobody is left to read one.
    if (!this.headersSent) this.destroy();
    return this.response;
  }

  /** The runtime read below the high-water mark: the end completes, or the stream may write again. */
  private pulled(): void {
    if (this.writableEnded) {
      if (this.writableLength === 0) this.finish();
      return;
    }
    if (!this.blocked) return;
    this.blocked = false;
    this.emit('drain');
  }

  /** Everything written was read: the body closes and the response with it. */
  private finish(): void {
    if (this.bodyDone) return;
    this.bodyDone = true;
    this.controller.close();
    this.emitClose();
  }

  private readonly onAbort = (): void => this.gone();

  /** The client left (the request's signal) or the runtime stopped reading (cancelled the body). */
  private gone(): void {
    // Nobody reads any more: the body is closed rather than errored, since an errored body is, to the
    // runtime, a failure of the handler's (`@hono/node-server` logs each one as an error, see aborted()).
    this.stop(false);
  }

  private stop(abort: boolean): void {
    if (this.destroyed) return;
    this.destroyed = true;
    if (!this.headersSent) {
      this.headersSent = true;
      this.settle(new Response(null, { status: CLOSED_BEFORE_HEAD_STATUS }));
    }
    if (!this.bodyDone) {
      this.bodyDone = true;
      if (abort) this.controller.error(aborted());
      else this.controller.close();
    }
    this.emitClose();
  }

  private emitClose(): void {
    if (this.closeEmitted) return;
    this.closeEmitted = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    // As Node emits it: after the call that closed the response has returned.
    queueMicrotask(() => this.emit('close'));
  }
}
