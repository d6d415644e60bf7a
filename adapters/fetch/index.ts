/**
 * `mcp-subscriptions/fetch`: `subscriptions/listen` on the web-standard fetch API, for any server that
 * hands a `Request` and takes a `Response` (Next.js route handlers, `@hono/node-server`, Bun and Deno,
 * Cloudflare-style workers). The listen stream is the `Response`'s body, a pull-based `ReadableStream`:
 * the runtime's reading is the backpressure, its cancelling (or the request's signal) the client leaving.
 */
import {
  createListenHandler,
  DEFAULT_MAX_BODY_BYTES,
  describeValue,
  ErrorCode,
  given,
  NODE_ADAPTER_OPTION_KEYS,
  OptionsError,
  positiveInteger,
  serveFetchRequest,
  type FetchServeOptions,
  type ListenHandler,
  type ListenHandlerOptions,
} from '../../lib/internal.ts';

/**
 * Options of {@link createFetchListen}: the engine's listen options (`ListenHandlerOptions`, documented
 * in `mcp-subscriptions`' types; their checks are handed the `Request`) plus the two below. Unknown keys
 * are refused at construction, with the nearest known one suggested.
 */
export interface FetchListenOptions<Context = undefined> extends ListenHandlerOptions<Request> {
  /**
   * Who the caller is, from the request your auth already checked (a verified token's subject, a
   * session's user), and the context your server hands the handler with it. Return `undefined` for an
   * anonymous caller: each anonymous listen is then served under an identity of its own (see
   * `NodeAdapterOptions.principal`). Required: a `Request` carries no authenticated caller by itself.
   * @example `(request) => verifiedSubject(request.headers.get('authorization'))`
   */
  readonly principal: (request: Request, context: Context) => string | undefined;
  /**
   * Largest body, in bytes, that is read to find out whether a request is a listen (a positive
   * integer); a larger JSON body is answered 413, since it may be a listen.
   * @default 4194304 (4 MiB, as the SDK's own)
   */
  readonly maxBodyBytes?: number;
}

/**
 * The handler {@link createFetchListen} makes: the `Response` of a listen (or of a
 * `notifications/cancelled` ending one of the caller's streams), or `undefined` for any other request,
 * which you serve as before (its body unread: the handler reads a clone). With the engine it serves from.
 */
export type FetchListen<Context = undefined> = ((
  request: Request,
  ...context: Context extends undefined ? [context?: Context] : [context: Context]
) => Promise<Response | undefined>) & { readonly handler: ListenHandler<Request> };

const WHERE = 'createFetchListen()';

/**
 * Serves `subscriptions/listen` on the web-standard fetch API: call it first with each request to your
 * MCP endpoint, and serve the request yourself (your MCP server's fetch handler) when it resolves
 * `undefined`. The request's body is read from a clone, so it is still unread then.
 *
 * The listen's `Response` streams for as long as the listen lasts: return it as it is (do not read or
 * buffer it), from a runtime that streams response bodies. It ends with the terminal result when the
 * hub completes (`hub.complete()`, `hub.close()`), and when the client goes (`request.signal`) or the
 * runtime cancels its body.
 *
 * @example
 * ```ts
 * // app/mcp/route.ts (Next.js App Router)
 * const hub = new SubscriptionHub();
 * const listen = createFetchListen({
 *   hub,
 *   capabilities: offer,
 *   principal: (request) => subjectOf(request),
 *   canRead: (uri, { principal }) => mayRead(principal, uri),
 * });
 * export async function POST(request: Request): Promise<Response> {
 *   return (await listen(request)) ?? mcpHandler.fetch(request, { authInfo: authInfoOf(request) });
 * }
 * ```
 */
export function createFetchListen<Context = undefined>(options: FetchListenOptions<Context>): FetchListen<Context> {
  const handler = createListenHandler<Request>(options, { where: WHERE, extraKeys: NODE_ADAPTER_OPTION_KEYS });
  if (typeof options.principal !== 'function') {
    throw new OptionsError(
      options.principal === undefined ? ErrorCode.MissingOption : ErrorCode.NotFunction,
      `Expected \`principal\` of ${WHERE} to be a function of the request that returns the caller (undefined for an anonymous one), got ${describeValue(options.principal)}`,
    );
  }
  const principal = options.principal;
  const maxBodyBytes = positiveInteger('maxBodyBytes', given(options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES));

  const listen = async (request: Request, context?: Context): Promise<Response | undefined> => {
    const serveOptions: FetchServeOptions<Request> = {
      handler,
      maxBodyBytes,
      principalOf: (req) => principal(req, context as Context),
    };
    return (await serveFetchRequest(request, request, serveOptions)).response;
  };
  return Object.assign(listen, { handler });
}

export type { ListenHandlerOptions };
