/**
 * The Fastify face the Fastify-hosted benchmark servers share (ours on Fastify, the ceiling mounted in
 * Fastify): a Fastify 5 app behind the host's bearer auth, as an `onRequest` hook that decorates the
 * request with `auth` (the SDK's `AuthInfo`, which the plugin's default principal reads), on a
 * `node:http` server whose `/control/*` routes are served before Fastify sees the request, as the
 * Express host serves them before Express. Fastify's logger stays off, as the Express apps log nothing
 * either, unless `BENCH_FASTIFY_LOGGER` names a level (to see what a logging app's streams keep).
 * Loaded only by those two servers: the others never load Fastify.
 */
import { createServer, type Server } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/server';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { authenticate, principalOf, toAuthInfo } from '../../sample-app/shared/auth.ts';
import { serveControl, type ControlTarget } from './control.ts';

/**
 * A request after the bench's bearer-auth hook: `auth` is `undefined` before it ran. Typed here, not by
 * augmenting Fastify's own types, which the sample app augments in the same program.
 */
export type AuthedRequest = FastifyRequest & { auth?: AuthInfo };

/** The principal the bearer-auth hook resolved (`''` when none did: the hook answered 401 then). */
export function principalOfRequest(request: FastifyRequest): string {
  return principalOf((request as AuthedRequest).auth) ?? '';
}

/** `BENCH_FASTIFY_LOGGER`: a log level turns Fastify's logger on (off by default, as Express logs nothing). */
const logLevel = process.env['BENCH_FASTIFY_LOGGER'];

/**
 * A Fastify app behind the host's bearer auth, with the routes `register` adds, on a `node:http`
 * server that serves `target`'s control routes first; ready, not listening yet.
 */
export async function fastifyServer(
  target: ControlTarget,
  register: (app: FastifyInstance) => void | Promise<void>,
): Promise<Server> {
  const app = Fastify({
    // BENCH_FASTIFY_LOGGER=<level>: Fastify's logger on (to stderr; stdout carries the port line), which
    // gives each request a child logger and keeps its request and reply until the response finishes.
    ...(logLevel !== undefined && logLevel !== '' ? { logger: { level: logLevel, stream: process.stderr } } : {}),
    serverFactory: (handler) =>
      createServer((req, res) => {
        if (!serveControl(target, req, res)) handler(req, res);
      }),
  });
  // Declared up front, as Fastify asks, so that every request keeps the one shape.
  app.decorateRequest('auth', undefined);
  app.addHook('onRequest', (request, reply, done) => {
    const caller = authenticate(request.headers.authorization, { conformance: false });
    if (caller === undefined) {
      void reply.code(401).header('WWW-Authenticate', 'Bearer').send({ error: 'unauthorized' });
      return;
    }
    (request as AuthedRequest).auth = toAuthInfo(caller);
    done();
  });
  await register(app);
  await app.ready();
  return app.server;
}
