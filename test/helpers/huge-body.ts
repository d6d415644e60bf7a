/**
 * A client that sends a huge listen body over a raw socket, as fast as the server lets it, until the
 * server closes the connection: for the tests that a body over the limit is answered 413 and never
 * read to its end.
 */
import { expect } from '@jest/globals';
import type http from 'node:http';
import net from 'node:net';

/** What the client would send in all: far more than a server may read. */
export const HUGE_BODY_BYTES = 256 * 1024 * 1024;
const CHUNK = 64 * 1024;

export interface HugeBodyOutcome {
  /** The server's answer, as far as the client received it. */
  readonly response: string;
  /** Body bytes the client handed to its socket before the server closed the connection. */
  readonly sent: number;
}

/** Counts the bytes `server` reads from its connections' sockets, headers included. */
export function countBytesRead(server: http.Server): () => number {
  const sockets: net.Socket[] = [];
  server.on('connection', (socket: net.Socket) => sockets.push(socket));
  return () => sockets.reduce((sum, socket) => sum + socket.bytesRead, 0);
}

/** POSTs a listen request to `url` whose body never ends (until {@link HUGE_BODY_BYTES}). */
export async function sendHugeBody(
  url: string,
  framing: 'chunked' | 'content-length',
  headers: Record<string, string> = {},
): Promise<HugeBodyOutcome> {
  const { hostname, port, pathname } = new URL(url);
  const client = net.connect(Number(port), hostname);
  let response = '';
  let sent = 0;
  client.on('data', (chunk: Buffer) => {
    response += chunk.toString('latin1');
  });
  let done = false;
  const closed = new Promise<void>((resolve) =>
    client.once('close', () => {
      done = true;
      resolve();
    }),
  );
  client.on('error', () => {
    // EPIPE or ECONNRESET: the server closed while the client was still sending, as it may.
  });
  await new Promise<void>((resolve) => client.once('connect', resolve));
  client.write(
    [
      `POST ${pathname} HTTP/1.1`,
      `Host: ${hostname}`,
      'Content-Type: application/json',
      'Accept: application/json, text/event-stream',
      'Mcp-Method: subscriptions/listen',
      framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${HUGE_BODY_BYTES}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      '',
      '',
    ].join('\r\n'),
  );
  const payload = Buffer.alloc(CHUNK, 'x');
  const frame =
    framing === 'chunked'
      ? Buffer.concat([Buffer.from(`${CHUNK.toString(16)}\r\n`), payload, Buffer.from('\r\n')])
      : payload;
  while (!done && sent < HUGE_BODY_BYTES) {
    const more = client.write(frame);
    sent += CHUNK;
    if (!more) await Promise.race([new Promise((resolve) => client.once('drain', resolve)), closed]);
    // A little slower than the socket: one chunk per macrotask.
    await new Promise((resolve) => setImmediate(resolve));
  }
  await closed;
  return { response, sent };
}

/**
 * Asserts the refusal of a huge body: a 413 with `Connection: close` and the JSON-RPC -32600, answered
 * while the client was still sending, after the server read about `limit` bytes (within `slack`) and not
 * what the client went on sending. The numbers show on failure.
 */
export function expectRefusedUnread(outcome: HugeBodyOutcome, serverRead: number, limit: number, slack: number): void {
  const { response, sent } = outcome;
  expect(response.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
  expect(response.toLowerCase()).toContain('\r\nconnection: close\r\n');
  expect(response).toContain('"code":-32600');
  expect(sent).toBeLessThan(HUGE_BODY_BYTES);
  expect({ serverRead, sent, withinLimit: serverRead <= limit + slack }).toStrictEqual({
    serverRead,
    sent,
    withinLimit: true,
  });
}
