/**
 * The request the host's guards see when the module asks them about one URI: the caller's own request,
 * presenting a `resources/read` of that URI instead of the listen request. Everything the guards use to
 * know the caller (headers, `user`, `auth`, the socket) is the caller's; only the MCP message changes.
 */
import { ServerResponse } from 'node:http';
import type { RequestId, WrappedReply } from '../../lib/internal.ts';
import { RESOURCES_READ_METHOD } from './mcp-subscriptions.constants.ts';
import type { McpRequest } from './mcp-subscriptions.interfaces.ts';

/** What the probe carries over from the listen request: its id and `_meta` (protocol version, capabilities). */
export interface ListenEnvelope {
  readonly id: RequestId | null;
  readonly meta: unknown;
}

/** The listen envelope of a parsed body, or `undefined` when the body is not an object. */
export function envelopeOf(body: unknown): ListenEnvelope | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { id, params } = body as { id?: unknown; params?: unknown };
  const meta = typeof params === 'object' && params !== null ? (params as { _meta?: unknown })._meta : undefined;
  return { id: typeof id === 'string' || typeof id === 'number' ? id : null, meta };
}

/**
 * A shallow clone of `req` (its prototype is `req`, so every property and method of the caller's request
 * is there) whose body is `{ jsonrpc, id, method: 'resources/read', params: { uri, _meta } }` and whose
 * `Mcp-Method` and `Mcp-Name` headers say so, as a 2026-07-28 client sends them. What a guard writes on
 * it (`req.user = …`) stays on the clone.
 */
export function readRequest(req: McpRequest, uri: string, envelope: ListenEnvelope | undefined): McpRequest {
  const probe = Object.create(req) as McpRequest;
  const headers = { ...req.headers, 'mcp-method': RESOURCES_READ_METHOD, 'mcp-name': uri };
  delete headers['content-length'];
  Object.defineProperty(probe, 'headers', { value: headers, writable: true, enumerable: true, configurable: true });
  probe.body = {
    jsonrpc: '2.0',
    id: envelope?.id ?? null,
    method: RESOURCES_READ_METHOD,
    params: { uri, ...(envelope?.meta !== undefined ? { _meta: envelope.meta } : {}) },
  };
  return probe;
}

/**
 * A response for the probe that reaches no socket: it has the framework's response methods (its
 * prototype is the real response's), so a guard may set headers or a status on it, but nothing it does
 * can touch the listen response, whose headers are still unsent.
 */
export function detachedResponse(probe: McpRequest, res: ServerResponse | undefined): ServerResponse {
  const detached = new ServerResponse(probe);
  if (res === undefined) return detached;
  Object.setPrototypeOf(detached, Object.getPrototypeOf(res) as object);
  const locals = (res as ServerResponse & { locals?: unknown }).locals;
  if (typeof locals === 'object' && locals !== null) {
    (detached as ServerResponse & { locals?: unknown }).locals = { ...locals };
  }
  return detached;
}

/** Fastify's request and reply as the module uses them on Nest's Fastify platform. */
export type FastifyRequestLike = McpRequest & { readonly raw: McpRequest };
export type FastifyReplyLike = WrappedReply & { readonly raw: ServerResponse };

/**
 * The same on Nest's Fastify platform: a reply whose prototype is the real one (a guard may call its
 * methods), whose `raw` is a detached response and whose `request` is the probe.
 */
export function detachedReply<Reply extends FastifyReplyLike>(probe: FastifyRequestLike, reply: Reply): Reply {
  const detached = Object.create(reply) as Reply;
  Object.defineProperty(detached, 'raw', { value: detachedResponse(probe.raw, reply.raw), enumerable: true });
  Object.defineProperty(detached, 'request', { value: probe, enumerable: true });
  return detached;
}
