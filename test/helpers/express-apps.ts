/**
 * Express 4 and Express 5 side by side (both installed: `express` is v5, `express4` the v4 alias),
 * and a loopback server that closes for good at the end of a test.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import express5, { type Request, type RequestHandler } from 'express';

const require = createRequire(import.meta.url);
// @types/express describes v5; the parts the tests use are the same in v4.
const express4 = require('express4') as typeof express5;

export interface ExpressFlavour {
  readonly name: string;
  readonly express: typeof express5;
}

export const expressFlavours: readonly ExpressFlavour[] = [
  { name: 'Express 5', express: express5 },
  { name: 'Express 4', express: express4 },
];

export interface RunningServer {
  readonly url: string;
  readonly server: http.Server;
  close(): Promise<void>;
}

/**
 * Serves `app` on a free port of 127.0.0.1, on a server made with Node's `options` (its timeouts,
 * say); `close()` also cuts open connections (SSE streams never end by themselves).
 */
export function listenOn(
  app: http.RequestListener,
  path = '/mcp',
  options: http.ServerOptions = {},
): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = http.createServer(options, app);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}${path}`,
        server,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
    server.once('error', reject);
  });
}

/** Reads a request's body itself, as a handler does when no body parser ran. */
export function readRaw(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (text += chunk));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/**
 * Auth for tests: the principal comes from the `X-User` header, set on `req.auth` in the shape the
 * SDK's bearer auth gives it; without the header the caller is anonymous.
 */
export const authFromUserHeader: RequestHandler = (req, _res, next) => {
  const user = req.get('x-user');
  if (user !== undefined) {
    (req as Request & { auth?: unknown }).auth = { token: 't', clientId: 'c', scopes: [], extra: { sub: user } };
  }
  next();
};
