/**
 * A real SSE client for tests: POSTs over node:http on loopback and parses the event stream as it
 * arrives, across arbitrary chunk boundaries.
 */
import http from 'node:http';

/** One parsed SSE event. */
export interface SseEvent {
  event: string;
  data: string;
  /** `data` parsed as JSON, or `undefined` when it is not JSON. */
  json: any;
}

/**
 * Incremental SSE parser (the WHATWG algorithm, minus ids and retry): feed it chunks split anywhere,
 * even inside a line or a multi-byte character; it calls `onEvent` per event and `onComment` per
 * comment line.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly onEvent: (event: SseEvent) => void,
    private readonly onComment: (text: string) => void = () => {},
  ) {}

  feed(chunk: Uint8Array | string): void {
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) !== -1) {
      // A lone \r at the very end may be the first half of \r\n: wait for the next chunk.
      if (this.buffer[newline] === '\r' && newline === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, newline);
      const width = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      this.buffer = this.buffer.slice(newline + width);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) {
        const data = this.data.join('\n');
        let json: any;
        try {
          json = JSON.parse(data);
        } catch {
          json = undefined;
        }
        this.onEvent({ event: this.event || 'message', data, json });
      }
      this.data = [];
      this.event = '';
      return;
    }
    if (line.startsWith(':')) {
      this.onComment(line.slice(1).trimStart());
      return;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
  }
}

/** The standard headers of a listen POST (spec §5). */
export function listenHeaders(extra: Record<string, string> = {}): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'subscriptions/listen',
    ...extra,
  };
}

/** The `_meta` of a listen request whose client declares the Tasks extension (spec §7): what `taskIds` needs. */
export const TASKS_META = {
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

/** A listen request body. */
export function listenBody(
  id: string | number,
  notifications: Record<string, unknown>,
  meta: Record<string, unknown> = {},
) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'subscriptions/listen',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
        ...meta,
      },
      notifications,
    },
  };
}

/** A `notifications/cancelled` body for listen `requestId` (spec §4), as a client sends it to end its stream. */
export function cancelBody(requestId: string | number) {
  return { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'done' } };
}

/** An open (or refused) listen response being read. */
export class SseStream {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  /** The raw body text, for exact-bytes assertions and for error responses. */
  text = '';
  ended = false;
  private waiters: (() => void)[] = [];

  constructor(
    readonly status: number,
    readonly headers: http.IncomingHttpHeaders,
    private readonly response: http.IncomingMessage,
    private readonly request: http.ClientRequest,
  ) {
    const parser = new SseParser(
      (event) => {
        this.events.push(event);
        this.wake();
      },
      (comment) => {
        this.comments.push(comment);
        this.wake();
      },
    );
    response.on('data', (chunk: Buffer) => {
      this.text += chunk.toString();
      parser.feed(chunk);
    });
    const done = (): void => {
      this.ended = true;
      this.wake();
    };
    response.on('end', done);
    response.on('close', done);
    response.on('error', done);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Waits until `predicate` holds (checked on every event, comment and end), or rejects after `timeoutMs`. */
  async until(predicate: () => boolean, what = 'condition', timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${what}; got ${JSON.stringify(this.events.map((e) => e.json ?? e.data))}`,
        );
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits for the `n`th event (1-based) and returns it. */
  async event(n: number, timeoutMs = 5000): Promise<SseEvent> {
    await this.until(() => this.events.length >= n, `event #${n}`, timeoutMs);
    return this.events[n - 1]!;
  }

  /** Waits for the response to end. */
  async end(timeoutMs = 5000): Promise<void> {
    await this.until(() => this.ended, 'the end of the response', timeoutMs);
  }

  /** Stops reading without closing: the socket's receive window fills and the server must back off. */
  pause(): void {
    this.response.pause();
  }

  resume(): void {
    this.response.resume();
  }

  /** Hangs up (HTTP cancellation, spec §4). */
  close(): void {
    this.request.destroy();
    this.response.destroy();
  }
}

/**
 * POSTs `body` to `url` and resolves once the response headers arrive, with a reader for its body.
 * `body` may be a string to send verbatim.
 */
export function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = listenHeaders(),
  agent: http.Agent | false = false,
): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    const request = http.request(url, { method: 'POST', headers, agent }, (response) => {
      resolve(new SseStream(response.statusCode ?? 0, response.headers, response, request));
    });
    request.on('error', reject);
    request.end(payload);
  });
}

/** Opens a listen stream with the standard headers. */
export function listen(
  url: string,
  id: string | number,
  notifications: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<SseStream> {
  return post(url, listenBody(id, notifications), listenHeaders(headers));
}
