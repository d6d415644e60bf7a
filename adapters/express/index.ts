/**
 * `mcp-subscriptions/express`: mounts `subscriptions/listen` on an Express app's MCP route, in front
 * of whatever serves the rest of MCP. Works with Express 4 and 5.
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  createListenHandler,
  defaultPrincipal as nodeDefaultPrincipal,
  DEFAULT_MAX_BODY_BYTES,
  given,
  optionalFunction,
  NODE_ADAPTER_OPTION_KEYS,
  positiveInteger,
  serveNodeRequest,
  type ListenHandler,
  type ListenHandlerOptions,
  type NodeAdapterOptions,
} from '../../lib/internal.ts';

/**
 * Options of {@link mcpSubscriptions}: the engine's listen options (`ListenHandlerOptions`) plus how
 * to read Express requests (`NodeAdapterOptions`), all documented in `mcp-subscriptions`' types.
 * Unknown keys are refused at construction, with the nearest known one suggested.
 */
export interface McpSubscriptionsOptions extends ListenHandlerOptions<Request>, NodeAdapterOptions<Request> {}

/** The middleware, with the engine it serves from (for `handler.options`, and tests). */
export type McpSubscriptionsMiddleware = RequestHandler & { readonly handler: ListenHandler<Request> };

/** The default principal: `req.auth` (the SDK's bearer auth), else `req.user` (Passport and friends). */
export function defaultPrincipal(req: Request): string | undefined {
  return nodeDefaultPrincipal(req);
}

/**
 * Serves `subscriptions/listen` (and `notifications/cancelled` for its streams) on the route it is
 * mounted on; every other request goes on, untouched, to the next handler. Mount it after your auth
 * middleware and before your MCP handler.
 *
 * When no body parser ran before it, it reads JSON bodies itself and leaves them on `req.body` as
 * `express.json()` would (a later `express.json()` sees the body as parsed and keeps it), so pass
 * `req.body` on to the SDK's handler: `nodeHandler(req, res, req.body)`.
 *
 * @example
 * ```ts
 * const hub = new SubscriptionHub();
 * const offer = { toolsListChanged: true, resourceSubscriptions: true };
 * app.post('/mcp', auth, mcpSubscriptions({ hub, capabilities: offer, canRead: (uri, { principal }) => mayRead(principal, uri) }),
 *   (req, res) => mcpHandler(req, res, req.body));
 * hub.resourceUpdated('note://alice/todo');
 * ```
 */
export function mcpSubscriptions(options: McpSubscriptionsOptions): McpSubscriptionsMiddleware {
  const handler = createListenHandler<Request>(options, {
    where: 'mcpSubscriptions()',
    extraKeys: NODE_ADAPTER_OPTION_KEYS,
  });
  optionalFunction('principal', options.principal);
  const principalOf = given(options.principal, defaultPrincipal);
  const maxBodyBytes = positiveInteger('maxBodyBytes', given(options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES));

  const serveOptions = {
    handler,
    principalOf,
    maxBodyBytes,
    onListen: (req: Request) => {
      // Express's router continuation closes over its whole routing state; listen never calls it.
      (req as Request & { next?: unknown }).next = undefined;
    },
  };

  const middleware = (req: Request, res: Response, next: NextFunction): void => {
    if (req.method !== 'POST') {
      next();
      return;
    }
    // Whatever Mcp-Method says, the body is read: a body naming listen under another header is ours to
    // refuse, not to pass on (docs/mount-order.md).
    serveNodeRequest(req, res, serveOptions).then((outcome) => {
      if (outcome === 'next') next();
    }, next);
  };
  return Object.assign(middleware, { handler });
}

export type { ListenHandlerOptions };
