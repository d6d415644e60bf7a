/**
 * Fastify apps for the Fastify plugin's suites: a listening app on 127.0.0.1 that closes for good at
 * the end of a suite, the bearer auth hook the suites put on their MCP route, and the app's (pino) log
 * read back as parsed lines.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** A Fastify request after {@link bearerAuth}: `request.auth` in the shape the SDK's bearer auth gives it. */
export type AuthedRequest = FastifyRequest & { auth?: unknown; user?: unknown };

/** Starts `app` on a free port of 127.0.0.1; resolves with the URL of `path` on it. */
export async function listenFastify(app: FastifyInstance, path = '/mcp'): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return `http://127.0.0.1:${port}${path}`;
}

/**
 * The host's auth, as an `onRequest` hook: `Authorization: Bearer <user>` authenticates `<user>`
 * (`request.auth.extra.sub`); no bearer token gets the host's 401, before anything else of the route.
 */
export async function bearerAuth(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
  if (match === null) {
    await reply.code(401).header('www-authenticate', 'Bearer').send({ error: 'unauthorized' });
    return;
  }
  const [, token = ''] = match;
  (request as AuthedRequest).auth = { token, clientId: 'c', scopes: [], extra: { sub: token } };
}

/** One line of the app's log, as pino writes it. */
export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** A pino destination that keeps every line: `Fastify({ logger: { level: 'warn', stream: log } })`. */
export function logCapture(): { readonly lines: LogLine[]; write(line: string): void } {
  const lines: LogLine[] = [];
  return { lines, write: (line) => void lines.push(JSON.parse(line) as LogLine) };
}
