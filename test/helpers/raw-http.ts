/**
 * HTTP requests exactly as a test spells them, for the fuzzer: header names in any case, a header
 * several times, any bytes as the body (invalid UTF-8 included), Content-Length or chunked framing
 * with the body split anywhere, and bodies that trickle in. The answer is read with the SSE client of
 * sse.ts, so a stream and an error response are read alike.
 */
import http from 'node:http';
import { SseStream } from './sse.ts';

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
