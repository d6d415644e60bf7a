/**
 * The soak's listen client, shared by both of its runs (`run.ts`, `stuck/`): one listen request on a
 * connection of its own over real TCP, its SSE parsed as bytes arrive (by the reader the bench shares,
 * tools/shared/sse-reader.ts), and what must not happen noted (no acknowledgement first, a terminal
 * result that is not its own, a message after it).
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { SseReader } from '../shared/sse-reader.ts';

export const PROTOCOL_VERSION = '2026-07-28';
const ACK = 'notifications/subscriptions/acknowledged';
const TASKS = 'io.modelcontextprotocol/tasks';

export interface ListenPlan {
  readonly cycle: number;
  readonly id: string | number;
  readonly notifications: Record<string, unknown>;
  readonly tasks: boolean;
  /** The principal (`x-soak-principal`); `c<cycle>` unless given. */
  readonly principal?: string;
  /** More request headers. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** The options of a POST of MCP method `method` to the soak server's `/mcp`, as `principal`. */
export function mcpPost(
  port: number,
  method: string,
  principal: string,
  extra: Record<string, string> = {},
): http.RequestOptions {
  return {
    host: '127.0.0.1',
    port,
    path: '/mcp',
    method: 'POST',
    agent: false,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': method,
      'x-soak-principal': principal,
      ...extra,
    },
  };
}

/** One listen request and what came back on it. */
export class Listen {
  readonly req: http.ClientRequest;
  res: http.IncomingMessage | undefined;
  acked = false;
  /** The acknowledgement's JSON text. */
  ack = '';
  /** The terminal result arrived, for this stream's id, as its last message. */
  completed = false;
  /** Something arrived that must not: a result for another id, a message after the result, no ack first. */
  problem: string | undefined;
  /**
   * Called with the data of every message after the acknowledgement, and with the time its chunk
   * arrived (tools/shared/clock.ts: comparable across processes).
   */
  onMessage: ((data: string, at: number) => void) | undefined;
  ended = false;
  readonly closed: Promise<void>;
  private readonly sse = new SseReader({ data: true, onEvent: (data, at) => this.event(data, at) });
  private readonly idJson: string;
  private onData: ((listen: Listen) => void) | undefined;
  private readonly waiters: (() => void)[] = [];

  constructor(
    port: number,
    readonly plan: ListenPlan,
    send: 'full' | number,
  ) {
    this.idJson = JSON.stringify(plan.id);
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: plan.id,
      method: 'subscriptions/listen',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
          'io.modelcontextprotocol/clientCapabilities': plan.tasks ? { extensions: { [TASKS]: {} } } : {},
        },
        notifications: plan.notifications,
      },
    });
    this.req = http.request(
      mcpPost(port, 'subscriptions/listen', plan.principal ?? `c${plan.cycle}`, {
        ...plan.headers,
        'content-length': String(Buffer.byteLength(body)),
        'x-soak-cycle': String(plan.cycle),
      }),
    );
    this.closed = new Promise((resolve) => {
      const done = (): void => {
        if (this.ended) return;
        this.ended = true;
        this.wake();
        resolve();
      };
      this.req.on('error', done);
      this.req.on('close', done);
      this.req.on('response', (res) => {
        this.res = res;
        res.on('data', (chunk: Buffer) => this.data(chunk));
        res.on('error', done);
        res.on('close', done);
        this.wake();
      });
    });
    if (send === 'full') this.req.end(body);
    else this.req.write(body.slice(0, Math.max(1, Math.floor(send * body.length))));
  }

  /** Calls `handler` on every chunk from now on (after the chunk is counted and parsed). */
  onChunk(handler: (listen: Listen) => void): void {
    this.onData = handler;
  }

  /** Bytes received. */
  get bytes(): number {
    return this.sse.bytes;
  }

  /** Messages received (keepalives are none), the acknowledgement included. */
  get events(): number {
    return this.sse.events;
  }

  private data(chunk: Buffer): void {
    this.sse.feed(chunk);
    this.onData?.(this);
    this.wake();
  }

  private event(data: string, at: number): void {
    if (this.completed) this.problem ??= 'a message after the terminal result';
    if (this.sse.events === 1) {
      if (!data.includes(`"method":"${ACK}"`) || !data.includes(`":${this.idJson}}`)) {
        this.problem ??= 'the first message is not its acknowledgement';
      }
      this.acked = true;
      this.ack = data;
      return;
    }
    if (data.includes('"resultType"')) {
      if (!data.startsWith(`{"jsonrpc":"2.0","id":${this.idJson},"result":{"resultType":"complete"`)) {
        this.problem ??= 'a terminal result that is not its own';
      }
      this.completed = true;
    }
    this.onMessage?.(data, at);
  }

  private wake(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Resolves once `condition()` holds, or `false` after `ms`. */
  async until(condition: () => boolean, ms: number): Promise<boolean> {
    const deadline = performance.now() + ms;
    while (!condition()) {
      const left = deadline - performance.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 50));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return true;
  }

  /** Stops reading: the socket's buffers fill and the server must hold back. */
  stopReading(): void {
    this.res?.pause();
    this.res?.socket.pause();
  }

  resumeReading(): void {
    this.res?.socket.resume();
    this.res?.resume();
  }

  hangUp(): void {
    this.req.destroy();
    this.res?.destroy();
  }
}

/** A reader that has not been acknowledged after this long has hung. */
export const ACK_GUARD_MS = 30_000;
/** Connections opened at once by {@link openMany}. */
const OPEN_CONCURRENCY = 64;

/**
 * Opens `count` listens, {@link OPEN_CONCURRENCY} at a time; resolves once each is acknowledged or
 * over. With `stopAtAck`, each stops reading in the very handler that parsed its acknowledgement:
 * nothing after it is read.
 */
export async function openMany(
  port: number,
  count: number,
  plan: (i: number) => ListenPlan,
  stopAtAck = false,
): Promise<Listen[]> {
  const listens = new Array<Listen>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const listen = new Listen(port, plan(i), 'full');
      if (stopAtAck) {
        listen.onChunk((self) => {
          if (!self.acked) return;
          self.stopReading();
          // Once: reading again later must not stop it again.
          self.onChunk(() => {});
        });
      }
      listens[i] = listen;
      await listen.until(() => listen.acked || listen.ended, ACK_GUARD_MS);
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, count) }, worker));
  return listens;
}

/** Posts `notifications/cancelled` for `plan`'s stream; resolves with the HTTP status. */
export function cancel(port: number, plan: ListenPlan): Promise<number> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId: plan.id, reason: 'soak' },
  });
  return new Promise((resolve) => {
    const req = http.request(mcpPost(port, 'notifications/cancelled', plan.principal ?? `c${plan.cycle}`), (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}
