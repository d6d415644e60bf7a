/**
 * The load generator's HTTP side: listen streams over raw `node:http` (one socket each, no pooling)
 * read by the SSE reader the soak shares (tools/shared/sse-reader.ts), and small helpers for the control routes and the
 * host's write route. Only 127.0.0.1, and every wait is bounded in time.
 */
import http from 'node:http';
import { now } from '../../tools/shared/clock.ts';
import { SseReader } from '../../tools/shared/sse-reader.ts';
import type { PublishOrder, Usage } from './control.ts';
import { listenBody, listenHeaders, PRINCIPAL, TOKEN, type Filter } from './wire.ts';

/** Listen streams: one socket each, never pooled, as many as the fd limit allows. */
export const streamAgent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
/** Control requests: a few kept-alive sockets. */
export const controlAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });

const HOST = '127.0.0.1';

/**
 * One listen stream as the load generator reads it: its events counted and timestamped as bytes
 * arrive (the shared {@link SseReader}, counting only: nothing allocated per event), and its HTTP
 * request and response, to stop reading, resume and hang up.
 */
export class StreamReader {
  /** Its body's reader: events, bytes, chunks, the last arrival. */
  readonly sse: SseReader;
  ackAt = Number.NaN;
  ended = false;
  /** The whole body, when captured. */
  text = '';
  /** Receive time of event `k` (the `k+1`th frame after the ack), up to the capacity given. */
  times: Float64Array;
  onFrame: (() => void) | undefined;
  request: http.ClientRequest | undefined;
  response: http.IncomingMessage | undefined;

  /**
   * @param onData when given, called with each event's data and arrival time (the acknowledgement's
   *   included): the reader then decodes every event, which costs the load generator more.
   */
  constructor(
    capacity: number,
    private readonly capture = false,
    onData?: (data: string, at: number) => void,
  ) {
    this.times = new Float64Array(capacity);
    this.sse =
      onData === undefined
        ? new SseReader({ onEvent: (_data, at) => this.frame(at) })
        : new SseReader({
            data: true,
            onEvent: (data, at) => {
              this.frame(at);
              onData(data, at);
            },
          });
  }

  /** Events received after the acknowledgement. */
  get events(): number {
    return this.sse.events > 0 ? this.sse.events - 1 : 0;
  }

  /** Data frames received, the acknowledgement included. */
  get frames(): number {
    return this.sse.events;
  }

  /** Chunks read: frames per chunk show batching. */
  get chunks(): number {
    return this.sse.chunks;
  }

  /** When the last byte arrived. */
  get lastAt(): number {
    return this.sse.lastAt;
  }

  feed(chunk: Buffer): void {
    if (this.capture) this.text += chunk.toString();
    this.sse.feed(chunk);
  }

  private frame(t: number): void {
    const k = this.sse.events - 2;
    if (k < 0) this.ackAt = t;
    else if (k < this.times.length) this.times[k] = t;
    this.onFrame?.();
  }

  /** Stops reading: the socket's buffers fill and the server must back off. */
  pause(): void {
    this.response?.pause();
    this.response?.socket.pause();
  }

  resume(): void {
    this.response?.socket.resume();
    this.response?.resume();
  }

  /** Hangs up (HTTP cancellation). */
  close(): void {
    this.request?.destroy();
    this.response?.destroy();
  }
}

/** Opens one listen stream; resolves once its acknowledgement arrived, rejects on an error response. */
export function openListen(
  port: number,
  id: string,
  filter: Filter,
  options: {
    capacity?: number;
    capture?: boolean;
    timeoutMs?: number;
    onData?: (data: string, at: number) => void;
  } = {},
): Promise<StreamReader> {
  const reader = new StreamReader(options.capacity ?? 0, options.capture ?? false, options.onData);
  const body = listenBody(id, filter);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reader.close();
      reject(new Error(`listen ${id}: no acknowledgement within ${options.timeoutMs ?? 30_000} ms`));
    }, options.timeoutMs ?? 30_000);
    const request = http.request(
      { host: HOST, port, path: '/mcp', method: 'POST', headers: listenHeaders(body), agent: streamAgent },
      (response) => {
        reader.response = response;
        if (response.statusCode !== 200) {
          let text = '';
          response.on('data', (chunk: Buffer) => (text += chunk.toString()));
          response.on('end', () => {
            clearTimeout(timer);
            reject(new Error(`listen ${id}: HTTP ${response.statusCode}: ${text.slice(0, 200)}`));
          });
          return;
        }
        reader.onFrame = () => {
          if (reader.frames === 1) {
            clearTimeout(timer);
            reader.onFrame = undefined;
            resolve(reader);
          }
        };
        response.on('data', (chunk: Buffer) => reader.feed(chunk));
        const done = (): void => {
          reader.ended = true;
        };
        response.on('end', done);
        response.on('close', done);
        response.on('error', done);
      },
    );
    reader.request = request;
    request.on('error', (error) => {
      reader.ended = true;
      clearTimeout(timer);
      reject(error);
    });
    request.end(body);
  });
}

/** Opens `count` streams, `concurrency` at a time; stream `i` gets `filter(i)` and id `s<i>`. */
export async function openMany(
  port: number,
  count: number,
  filter: (i: number) => Filter,
  options: {
    concurrency?: number;
    capacity?: number;
    from?: number;
    onData?: (data: string, at: number) => void;
  } = {},
): Promise<StreamReader[]> {
  const from = options.from ?? 0;
  const readers = new Array<StreamReader>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      readers[i] = await openListen(port, `s${from + i}`, filter(from + i), {
        capacity: options.capacity ?? 0,
        ...(options.onData !== undefined ? { onData: options.onData } : {}),
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 64, count) }, worker));
  return readers;
}

export function closeAll(readers: Iterable<StreamReader>): void {
  for (const reader of readers) reader.close();
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `predicate` every `pollMs` until it holds or `timeoutMs` passed; returns whether it held. */
export async function waitFor(predicate: () => boolean, timeoutMs: number, pollMs = 5): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() >= deadline) return false;
    await sleep(pollMs);
  }
  return true;
}

/** One plain HTTP request; resolves with the status and body text. */
export function request(
  port: number,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
  agent: http.Agent = controlAgent,
  retried = false,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const allHeaders = body === undefined ? headers : { 'content-length': String(Buffer.byteLength(body)), ...headers };
    const req = http.request({ host: HOST, port, path, method, headers: allHeaders, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setTimeout(120_000, () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on('error', (error: NodeJS.ErrnoException) => {
      // A kept-alive socket the server closed (its 5 s keep-alive timeout ran out while the load waited on a
      // slow server) just as it was reused: the request never reached the server, so it is sent again, once,
      // on a fresh socket (what Node's docs advise for `reusedSocket`).
      if (req.reusedSocket && error.code === 'ECONNRESET' && !retried) {
        request(port, method, path, body, headers, agent, true).then(resolve, reject);
        return;
      }
      reject(error);
    });
    req.end(body);
  });
}

/** The server's own CPU time, memory (after GC when `gc`) and open-stream count. */
export async function usage(port: number, gc = false): Promise<Usage> {
  const { status, text } = await request(port, 'GET', `/control/usage${gc ? '?gc=1' : ''}`);
  if (status !== 200) throw new Error(`usage: HTTP ${status}: ${text}`);
  return JSON.parse(text) as Usage;
}

/** Server CPU time between two usage snapshots, in µs. */
export function cpuBetween(a: Usage, b: Usage): number {
  return b.cpu.user + b.cpu.system - (a.cpu.user + a.cpu.system);
}

/** Publishes events back to back on the server; returns each one's publish time. */
export async function publish(port: number, order: PublishOrder): Promise<number[]> {
  const { status, text } = await request(port, 'POST', '/control/publish', JSON.stringify(order), {
    'content-type': 'application/json',
  });
  if (status !== 200) throw new Error(`publish: HTTP ${status}: ${text}`);
  return (JSON.parse(text) as { t: number[] }).t;
}

export async function prefill(port: number, uris: readonly string[]): Promise<void> {
  const { status, text } = await request(port, 'POST', '/control/prefill', JSON.stringify({ uris }), {
    'content-type': 'application/json',
  });
  if (status !== 200) throw new Error(`prefill: HTTP ${status}: ${text}`);
}

/**
 * Sends requests from `concurrency` kept-alive connections for `durationMs` (and at most
 * `maxRequests`); `make(n)` gives the `n`th request. Returns completed requests and the time taken.
 */
export async function hammer(
  port: number,
  options: { durationMs: number; concurrency: number; maxRequests?: number },
  make: (n: number) => { method: string; path: string; body: string; headers: Record<string, string> },
): Promise<{ requests: number; failed: number; elapsedMs: number; statuses: Record<number, number> }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const statuses: Record<number, number> = {};
  let sent = 0;
  let requests = 0;
  let failed = 0;
  const start = now();
  const deadline = start + options.durationMs;
  const max = options.maxRequests ?? Number.MAX_SAFE_INTEGER;
  const worker = async (): Promise<void> => {
    while (now() < deadline && sent < max) {
      const { method, path, body, headers } = make(sent++);
      try {
        const { status } = await request(port, method, path, body, headers, agent);
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status >= 200 && status < 300) requests++;
        else failed++;
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  const elapsedMs = now() - start;
  agent.destroy();
  return { requests, failed, elapsedMs, statuses };
}

/** A kept-alive connection to one node's write route; `put(name, k)` rewrites note `name` (version `k`). */
export function noteWriter(port: number): { put(name: string, k: number): Promise<void>; close(): void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
  return {
    async put(name, k) {
      const body = JSON.stringify({ text: `v${k}` });
      const { status, text } = await request(port, 'PUT', `/api/notes/${PRINCIPAL}/${name}`, body, headers, agent);
      if (status !== 200 && status !== 201) throw new Error(`PUT ${name}: HTTP ${status}: ${text.slice(0, 200)}`);
    },
    close: () => agent.destroy(),
  };
}

/** Reads the last data frame of a captured body as JSON. */
export function lastFrame(text: string): { method?: string; params?: { uri?: string } } | undefined {
  const at = text.lastIndexOf('\ndata: ');
  if (at === -1) return undefined;
  const end = text.indexOf('\n', at + 7);
  try {
    return JSON.parse(text.slice(at + 7, end === -1 ? undefined : end)) as { method?: string };
  } catch {
    return undefined;
  }
}
