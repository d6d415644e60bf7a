/**
 * A listen client for streams that carry frames of megabytes: the SSE parser of sse.ts, fed whenever
 * a chunk brings a line end rather than on every chunk. The parser searches all it holds for a line
 * end on each feed, so a 4 MiB frame arriving in 16 KiB chunks costs it seconds (measured: 4.3 s at
 * 16 KiB, 1.1 s at 64 KiB); fed this way, it sees each byte about twice.
 */
import http from 'node:http';
import { SseParser, type SseEvent } from './sse.ts';

export class LineFedStream {
  readonly events: SseEvent[] = [];
  ended = false;
  private held: Buffer[] = [];

  constructor(
    readonly status: number,
    private readonly response: http.IncomingMessage,
    private readonly request: http.ClientRequest,
  ) {
    const parser = new SseParser((event) => this.events.push(event));
    response.on('data', (chunk: Buffer) => {
      this.held.push(chunk);
      if (chunk.includes(0x0a) || chunk.includes(0x0d)) {
        parser.feed(this.held.length === 1 ? chunk : Buffer.concat(this.held));
        this.held = [];
      }
    });
    const done = (): void => {
      this.ended = true;
    };
    response.on('end', done);
    response.on('close', done);
    response.on('error', done);
  }

  /** Waits for the `n`th event (1-based) and returns it, or rejects after `timeoutMs`. */
  async event(n: number, timeoutMs = 5000): Promise<SseEvent> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length < n) {
      if (Date.now() > deadline || this.ended) throw new Error(`no event #${n} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    return this.events[n - 1]!;
  }

  /** Hangs up. */
  close(): void {
    this.request.destroy();
    this.response.destroy();
  }
}

/** POSTs `body` (JSON) to `url` and resolves once the response headers arrive. */
export function postLineFed(url: string, body: unknown, headers: Record<string, string>): Promise<LineFedStream> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers, agent: false }, (response) => {
      resolve(new LineFedStream(response.statusCode ?? 0, response, request));
    });
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}
