/**
 * What every Node-based adapter needs from a raw `IncomingMessage` (Express's, Nest's, Fastify's
 * `raw`): who the caller is by the common auth conventions, and the body, whether or not a body parser
 * ran. Framework-free: it relies only on Node's request and on body-parser's public conventions.
 */
import type { IncomingMessage } from 'node:http';
import { ProtocolError, RpcErrorCode } from './errors.ts';

/** A Node request as the adapters see it: maybe authenticated, maybe with a parsed body. */
export type NodeRequest = IncomingMessage & { auth?: unknown; user?: unknown; body?: unknown; _body?: boolean };

function stringField(value: unknown, ...names: string[]): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  for (const name of names) {
    const field = (value as Record<string, unknown>)[name];
    if (typeof field === 'string' && field !== '') return field;
  }
  return undefined;
}

/**
 * The default principal: `req.auth` as the SDK's `requireBearerAuth` sets it (`extra.sub`, else
 * `extra.principal`, else `clientId`), else `req.user` as Passport sets it (a string, or its `id`,
 * `sub` or `username`). `undefined` for an anonymous caller.
 */
export function defaultPrincipal(req: { readonly auth?: unknown; readonly user?: unknown }): string | undefined {
  const { auth, user } = req;
  if (auth !== undefined && auth !== null) {
    return stringField((auth as { extra?: unknown }).extra, 'sub', 'principal') ?? stringField(auth, 'clientId');
  }
  if (typeof user === 'string' && user !== '') return user;
  return stringField(user, 'id', 'sub', 'username');
}

/**
 * Whether a body parser already consumed the request: the stream has ended (Express 5's parsers) or
 * `_body` is set (Express 4's). `req.body` alone says nothing: Express 4's parsers set `{}` even for a
 * Content-Type they skip.
 */
export function bodyWasParsed(req: NodeRequest): boolean {
  return req.readableEnded || req._body === true;
}

/** Leaves `body` where `express.json()` would have, so that the next handler (and parser) finds it. */
export function leaveParsedBody(req: NodeRequest, body: unknown): void {
  req.body = body;
  req._body = true;
}

/** A body over the limit: refused with 413 before any stream opens; the connection is not reused. */
export function bodyTooLarge(limit: number): ProtocolError {
  return new ProtocolError(RpcErrorCode.InvalidRequest, `Request body exceeds ${limit} bytes`, {
    httpStatus: 413,
    headers: { Connection: 'close' },
  });
}

/** Reads the request stream, at most `limit` bytes; rejects with {@link bodyTooLarge} beyond. */
export function readRequestBody(req: IncomingMessage, limit: number): Promise<Buffer> {
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
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
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
