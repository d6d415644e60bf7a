/**
 * HTTP requests exactly as a test spells them, for the fuzzer: header names in any case, a header
 * several times, any bytes as the body (invalid UTF-8 included), Content-Length or chunked framing
 * with the body split anywhere, and bodies that trickle in. The answer is read with the SSE client of
 * sse.ts, so a stream and an error response are read alike. And a listen over a raw socket read as raw
 * bytes, with the exact frames and the HTTP/1.1 chunks to check them against (the framework suites).
 */
import http from 'node:http';
import { connect as netConnect } from 'node:net';
import { expect } from '@jest/globals';
import { waitFor } from './fake-response.ts';
import { SseStream } from './sse.ts';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

export interface RawRequest {
  /** Header lines in order, names spelled as given; `Host` and the framing header are added. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer;
  readonly framing: 'content-length' | 'chunked';
  /** Where a chunked body is cut into chunks (byte offsets, any order; out-of-range ones ignored). */
  readonly cuts?: readonly number[];
}

/** The body's pieces at the given offsets. */
export function pieces(body: Buffer, cuts: readonly number[] = []): Buffer[] {
  const at = [...new Set(cuts.filter((cut) => cut > 0 && cut < body.length))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...at, body.length]) {
    out.push(body.subarray(from, cut));
    from = cut;
  }
  return out;
}

/** A reader of an answer that also keeps its bytes, for checks no chunk boundary may disturb. */
export type RawAnswer = SseStream & {
  /** Every byte of the answer's body received so far. */
  bytes(): Buffer;
};

function reader(response: http.IncomingMessage, request: http.ClientRequest): RawAnswer {
  const chunks: Buffer[] = [];
  response.on('data', (chunk: Buffer) => chunks.push(chunk));
  const stream = new SseStream(response.statusCode ?? 0, response.headers, response, request);
  return Object.assign(stream, { bytes: () => Buffer.concat(chunks) });
}

/** POSTs `request` to `url` and resolves with a reader once the answer's headers arrive. */
export function rawPost(url: string, request: RawRequest): Promise<RawAnswer> {
  const { host, pathname } = new URL(url);
  const lines: string[] = ['Host', host];
  for (const [name, value] of request.headers) lines.push(name, value);
  if (request.framing === 'chunked') lines.push('Transfer-Encoding', 'chunked');
  else lines.push('Content-Length', String(request.body.length));
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', path: pathname, headers: lines, agent: false }, (response) => {
      // The server may close a connection whose body it refused to read (413) while this side still
      // has bytes in flight: the answer is what counts.
      req.on('error', () => {});
      resolve(reader(response, req));
    });
    req.on('error', reject);
    if (request.framing === 'chunked') {
      for (const piece of pieces(request.body, request.cuts)) if (piece.length > 0) req.write(piece);
      req.end();
    } else {
      req.end(request.body);
    }
  });
}

/**
 * POSTs `body` to `url` a piece at a time, `pauseMs[i]` after piece `i`, with a Content-Length
 * announced up front: a client that trickles its body in (slowloris). Resolves once the whole body
 * is handed to the socket, with the answer still to come through `answer`.
 */
export function tricklePost(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  cuts: readonly number[],
  pauseMs: readonly number[],
): { readonly sent: Promise<void>; readonly answer: Promise<RawAnswer>; abort(): void } {
  let req!: http.ClientRequest;
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    req = http.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(body.length) }, agent: false },
      (response) => resolve(reader(response, req)),
    );
    req.on('error', reject);
  });
  req.setNoDelay(true);
  req.flushHeaders();
  let aborted = false;
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const sent = (async () => {
    const parts = pieces(body, cuts);
    for (let i = 0; i < parts.length && !aborted; i++) {
      req.write(parts[i]!);
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, pauseMs[i % Math.max(1, pauseMs.length)] ?? 0);
      });
    }
    if (!aborted) req.end();
  })();
  return {
    sent,
    answer,
    abort: () => {
      aborted = true;
      clearTimeout(timer);
      wake?.();
      req.destroy();
    },
  };
}

/** The exact bytes of a tools list-change frame on the stream `id`. */
export function toolsFrameOf(id: string): string {
  return `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"${SUBSCRIPTION_ID}":${JSON.stringify(id)}}}}\n\n`;
}

/** The exact bytes of a resource-update frame for `uri` on the stream `id`. */
export function updateFrameOf(uri: string, id: string): string {
  return `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":${JSON.stringify(uri)},"_meta":{"${SUBSCRIPTION_ID}":${JSON.stringify(id)}}}}\n\n`;
}

/** The chunks of an HTTP/1.1 chunked body, each checked against its declared size in bytes. */
export function dechunk(body: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol === -1) throw new Error(`no chunk size line at byte ${at}`);
    const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error(`a chunk size that is not hex at byte ${at}`);
    if (size === 0) return chunks;
    const start = eol + 2;
    expect(body.subarray(start + size, start + size + 2).toString('latin1')).toBe('\r\n');
    chunks.push(body.subarray(start, start + size));
    at = start + size + 2;
  }
}

/**
 * A listen request over a raw socket, with `headers` (Host and Content-Length added), read as raw bytes:
 * what a client of that HTTP version gets.
 */
export async function rawListen(url: string, version: '1.0' | '1.1', body: unknown, headers: Record<string, string>) {
  const { hostname, port } = new URL(url);
  const socket = netConnect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const payload = Buffer.from(JSON.stringify(body));
  const lines = { ...headers, host: `${hostname}:${port}`, 'content-length': String(payload.length) };
  socket.write(
    `POST /mcp HTTP/${version}\r\n${Object.entries(lines)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')}\r\n`,
  );
  socket.write(payload);
  let received = Buffer.alloc(0);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('data', (data: Buffer) => (received = Buffer.concat([received, data])));
  const split = () => {
    const end = received.indexOf('\r\n\r\n');
    return end === -1
      ? { head: '', body: Buffer.alloc(0) }
      : { head: received.subarray(0, end).toString('latin1'), body: received.subarray(end + 4) };
  };
  return {
    until: (predicate: (text: string) => boolean, what: string) =>
      waitFor(() => predicate(received.toString('utf8')), what),
    /** The whole response, once the server has finished it (HTTP/1.1: its last chunk; 1.0: the close). */
    async ended() {
      await (version === '1.1' ? waitFor(() => received.includes('\r\n0\r\n\r\n'), 'the last chunk') : closed);
      return split();
    },
    destroy: () => socket.destroy(),
  };
}
