/**
 * The body of a request to the MCP route, whether or not a body parser ran before it. Nest parses JSON
 * bodies by default; an app that parses after its guards (`bodyParser: false`) leaves the stream
 * unread, and then the module reads it, bounded, and leaves the result where a body parser would.
 */
import { ProtocolError, RpcErrorCode } from '../../lib/index.ts';
import type { McpRequest } from './mcp-subscriptions.interfaces.ts';

/** What the route found: a parsed body, or bytes for the engine to parse, and whether it read the stream. */
export interface FoundBody {
  readonly body?: unknown;
  readonly rawBody?: Buffer | string;
  /** The module consumed the request stream: nobody after it can read the bytes again. */
  readonly consumed: boolean;
}

type BodyRequest = McpRequest & { _body?: boolean };

/**
 * Whether a body parser already consumed the request: the stream has ended (Express 5's parsers) or
 * `_body` is set (Express 4's). `req.body` alone says nothing: a parser may set it for a type it skips.
 */
export function parsedBefore(req: McpRequest): boolean {
  return req.readableEnded || (req as BodyRequest)._body === true;
}

/** Leaves `body` where `express.json()` would have, so that the next handler (and parser) sees it. */
export function leaveBody(req: McpRequest, body: unknown): void {
  req.body = body;
  (req as BodyRequest)._body = true;
}

/** A body over the limit: refused before the stream opens, and the connection is not reused. */
export function bodyTooLarge(limit: number): ProtocolError {
  return new ProtocolError(RpcErrorCode.InvalidRequest, `Request body exceeds ${limit} bytes`, {
    httpStatus: 413,
    headers: { Connection: 'close' },
  });
}

/** Reads the request stream, at most `limit` bytes; rejects with {@link bodyTooLarge} beyond. */
export function readBody(req: McpRequest, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length']) > limit) {
      reject(bodyTooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      req.removeListener('data', onData);
      req.removeListener('end', onEnd);
      req.removeListener('error', onError);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        // Drain the rest so the 413 can still be written on this socket.
        req.resume();
        reject(bodyTooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
  });
}

/** Parses bytes as JSON; `undefined` when they are not JSON. */
export function parseJsonOrUndefined(raw: Buffer | string): unknown {
  try {
    return JSON.parse(raw.toString()) as unknown;
  } catch {
    return undefined;
  }
}
