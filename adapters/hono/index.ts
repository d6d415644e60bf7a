/**
 * `mcp-subscriptions/hono`: a Hono 4 middleware serving `subscriptions/listen` on a Hono app's MCP route,
 * in front of whatever serves the rest of MCP there (the SDK's handler through its web-standard `fetch`).
 * A thin face over the web-standard one (`mcp-subscriptions/fetch`): the same engine, body reading and
 * stream, with the principal and a parsed body taken from Hono's context.
 */
import type { Context, Env, MiddlewareHandler } from 'hono';
import {
  createListenHandler,
  DEFAULT_MAX_BODY_BYTES,
  defaultPrincipal as nodeDefaultPrincipal,
  given,
  NODE_ADAPTER_OPTION_KEYS,
  optionalFunction,
  positiveInteger,
  serveFetchRequest,
  type FetchServeOptions,
  type ListenHandler,
  type ListenHandlerOptions,
} from '../../lib/internal.ts';

/**
 * Options of {@link mcpSubscriptions}: the engine's listen options (`ListenHandlerOptions`, documented in
 * `mcp-subscriptions`' types; their checks are handed Hono's `Context`) plus the two below. Unknown keys
 * are refused at construction, with the nearest known one suggested.
 */
export interface McpSubscriptionsHonoOptions<E extends Env = Env> extends ListenHandlerOptions<Context<E>> {
  /**
   * Who the caller is, from the context your auth middleware set (`c.get(...)`); `undefined` for an
   * anonymous caller (see `NodeAdapterOptions.principal` in `mcp-subscriptions`' types).
   * @default the SDK's `AuthInfo` at `c.get('mcpAuthInfo')` (as the SDK's Hono auth middleware sets it)
   * or `c.get('auth')` (`extra.sub`, else `extra.principal`), else `c.get('user')` (a string, or its
   * `id`, `sub` or `username`)
   */
  readonly principal?: (c: Context<E>) => string | undefined;
  /**
   * Largest body, in bytes, that is read to find out whether a request is a listen (a positive
   * integer); a larger JSON body is answered 413, since it may be a listen.
   * @default 4194304 (4 MiB, as the SDK's own)
   */
  readonly maxBodyBytes?: number;
}

/** The middleware, with the engine it serves from (for `handler.options`, and tests). */
export type McpSubscriptionsHonoMiddleware<E extends Env = Env> = MiddlewareHandler<E> & {
  readonly handler: ListenHandler<Context<E>>;
};

/** A context variable by name, whether or not the app's `Env` declares it. */
function variable(c: Context, name: string): unknown {
  return (c.get as (key: string) => unknown)(name);
}

/**
 * The default principal: the SDK's `AuthInfo` at `c.get('mcpAuthInfo')` or `c.get('auth')`
 * (`extra.sub`, else `extra.principal`), else `c.get('user')`.
 */
export function defaultPrincipal(c: Context): string | undefined {
  return nodeDefaultPrincipal({
    auth: variable(c, 'mcpAuthInfo') ?? variable(c, 'auth'),
    user: variable(c, 'user'),
  });
}

const WHERE = 'mcp-subscriptions/hono';

/**
 * Serves `subscriptions/listen` (and `notifications/cancelled` for its streams) on the route it is
 * mounted on; every other request goes on to `next()`. Mount it after your auth middleware and before
 * your MCP handler.
 *
 * It reads JSON bodies from a clone of the request, so `c.req.raw` is still unread after it; the body
 * it parsed is left at `c.get('parsedBody')` (the SDK's Hono convention), and a body already there is
 * used as it is. Pass either on to the SDK's handler: `mcp.fetch(c.req.raw, { authInfo, parsedBody })`.
 *
 * @example
 * ```ts
 * const hub = new SubscriptionHub();
 * app.post('/mcp', auth, mcpSubscriptions({ hub, capabilities: offer, canRead: (uri, { principal }) => mayRead(principal, uri) }),
 *   (c) => mcp.fetch(c.req.raw, { authInfo: c.get('auth'), parsedBody: c.get('parsedBody') }));
 * hub.resourceUpdated('note://alice/todo');
 * ```
 */
export function mcpSubscriptions<E extends Env = Env>(
  options: McpSubscriptionsHonoOptions<E>,
): McpSubscriptionsHonoMiddleware<E> {
  const handler = createListenHandler<Context<E>>(options, { where: WHERE, extraKeys: NODE_ADAPTER_OPTION_KEYS });
  optionalFunction('principal', options.principal);
  const serveOptions: FetchServeOptions<Context<E>> = {
    handler,
    principalOf: given(options.principal, defaultPrincipal),
    maxBodyBytes: positiveInteger('maxBodyBytes', given(options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES)),
  };

  /** The listen's response, or `undefined` for a request that goes on (its parsed body left for the next). */
  const serve = async (c: Context<E>): Promise<Response | undefined> => {
    if (c.req.method !== 'POST') return undefined;
    const parsedBody = variable(c, 'parsedBody');
    const served = await serveFetchRequest(
      c.req.raw,
      c,
      serveOptions,
      parsedBody !== undefined ? { body: parsedBody } : undefined,
    );
    if (served.response === undefined && parsedBody === undefined && served.body !== undefined) {
      (c.set as (key: string, value: unknown) => void)('parsedBody', served.body);
    }
    return served.response;
  };

  const middleware: MiddlewareHandler<E> = async (c, next) => {
    const response = await serve(c);
    if (response !== undefined) return response;
    await next();
    return undefined;
  };
  return Object.assign(middleware, { handler });
}

export type { ListenHandlerOptions };
