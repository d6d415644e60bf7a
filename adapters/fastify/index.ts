/**
 * `mcp-subscriptions/fastify`: a Fastify 5 plugin serving `subscriptions/listen` on a Fastify app's MCP
 * route, in front of whatever serves the rest of MCP there.
 *
 * How it gets in front without a second route (Fastify refuses two on one method and path): an
 * `onRoute` hook hands the MCP route's own handler to listen first. Every hook of that route (its
 * auth above all), its body limit and its parser have run by then, exactly as for the rest of MCP; a
 * request that is not listen (nor the cancellation of one of the caller's streams) goes on to the
 * route's handler unchanged, in the same call. The plugin skips encapsulation (as `fastify-plugin`
 * does), so the hook sees the routes of the context it is registered in and of that context's children.
 */
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyPluginCallback,
  FastifyReply,
  FastifyRequest,
  RouteHandlerMethod,
  RouteOptions,
} from 'fastify';
import {
  bodyInput,
  consoleLogger,
  takeOverReply,
  closeUnreadAfterAnswer,
  createListenHandler,
  defaultPrincipal as nodeDefaultPrincipal,
  describeValue,
  dispatchRequest,
  ErrorCode,
  failureSummary,
  given,
  optionsObject,
  optionalFunction,
  OptionsError,
  type DispatchOptions,
  type ListenHandler,
  type ListenHandlerOptions,
  type Logger,
  type Hub,
} from '../../lib/internal.ts';

/**
 * Options of the {@link mcpSubscriptions} plugin: the engine's listen options (`ListenHandlerOptions`,
 * documented in `mcp-subscriptions`' types) plus the two below. Unknown keys are refused when the plugin
 * loads, with the nearest known one suggested; Fastify's own register options (`prefix`, `logLevel`,
 * `logSerializers`) are accepted and have no effect here.
 *
 * There is no `maxBodyBytes`: Fastify reads the body, under the route's `bodyLimit` (Fastify's
 * default is 1 MiB; a larger body gets Fastify's own 413 before any handler runs).
 */
export interface McpSubscriptionsFastifyOptions extends ListenHandlerOptions<FastifyRequest> {
  /**
   * The MCP route's URL, as the route is registered, prefixes included (`fastify.register(routes,
   * { prefix: '/api' })` with `'/mcp'` inside is `'/api/mcp'`). Every route on it that serves POST is
   * handed to listen first.
   * @default '/mcp'
   */
  readonly path?: string;
  /**
   * Who the caller is, from the request your auth hook already authenticated; `undefined` for an
   * anonymous caller (see `NodeAdapterOptions.principal` in `mcp-subscriptions`' types).
   * @default `request.auth` as the SDK's bearer auth sets it (`extra.sub`, else `extra.principal`), else
   * `request.user` (`@fastify/jwt`, `@fastify/passport`: a string, or its `id`, `sub` or `username`)
   */
  readonly principal?: (request: FastifyRequest) => string | undefined;
}

/** What the plugin decorates the Fastify instance with: `fastify.mcpSubscriptions`. */
export interface McpSubscriptionsDecorator {
  /** The hub streams are served from: emit events on it (`fastify.mcpSubscriptions.hub.toolsListChanged()`). */
  readonly hub: Hub;
  /** The engine (its resolved options are `handler.options`). */
  readonly handler: ListenHandler<FastifyRequest>;
  /** The MCP route's URL the plugin serves listen on. */
  readonly path: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set by `mcp-subscriptions/fastify`: its hub, engine and path. */
    readonly mcpSubscriptions: McpSubscriptionsDecorator;
  }
}

/** The default principal: `request.auth` (the SDK's bearer auth), else `request.user` (`@fastify/jwt` and friends). */
export function defaultPrincipal(request: FastifyRequest): string | undefined {
  return nodeDefaultPrincipal(request);
}

/** Fastify's register options: Fastify hands them to every plugin along with the plugin's own. */
const REGISTER_OPTION_KEYS = ['prefix', 'logLevel', 'logSerializers'];
const FASTIFY_OPTION_KEYS = ['path', 'principal', ...REGISTER_OPTION_KEYS];
const DEFAULT_PATH = '/mcp';
/** Fastify's error for a body over the route's `bodyLimit`. */
const BODY_TOO_LARGE = 'FST_ERR_CTP_BODY_TOO_LARGE';
const WHERE = 'mcp-subscriptions/fastify';

/** The engine's logger on the app's own (pino) logger: the failure's name and code, never its message. */
function fastifyLogger(log: FastifyBaseLogger): Logger {
  const line = (message: string, details?: Record<string, unknown>): string => {
    const why = failureSummary(details);
    return why === undefined ? message : `${message}: ${why}`;
  };
  return {
    warn: (message, details) => log.warn(line(message, details)),
    error: (message, details) => log.error(line(message, details)),
  };
}

/**
 * The app's own logger when it has one; with Fastify's logger off (no level), the library's default
 * (stderr), so that a failing check or a listen without a caller is never silent.
 */
function defaultLogger(log: FastifyBaseLogger): Logger {
  return typeof log.level === 'string' ? fastifyLogger(log.child({ plugin: 'mcp-subscriptions' })) : consoleLogger;
}

function checkPath(value: unknown): string {
  if (value === undefined) return DEFAULT_PATH;
  if (typeof value !== 'string' || !value.startsWith('/')) {
    throw new OptionsError(
      ErrorCode.InvalidPath,
      `Expected \`path\` to be a route URL starting with '/', like '/mcp', got ${describeValue(value)}`,
    );
  }
  return value;
}

function servesPost(method: RouteOptions['method']): boolean {
  return Array.isArray(method) ? method.includes('POST') : method === 'POST';
}

function routeNotPlaced(message: string): OptionsError {
  return new OptionsError(ErrorCode.RouteNotPlaced, `${message} (docs/mount-order.md)`);
}

/** Everything the plugin does when it loads; throws on a programmer's mistake (see {@link plugin}). */
function setUp(fastify: FastifyInstance, options: McpSubscriptionsFastifyOptions): void {
  optionsObject(options);
  const path = checkPath(options.path);
  optionalFunction('principal', options.principal);
  const handler = createListenHandler<FastifyRequest>(
    { ...options, logger: options.logger ?? defaultLogger(fastify.log) },
    { where: WHERE, extraKeys: FASTIFY_OPTION_KEYS },
  );
  const { hub } = handler.options;
  if (fastify.hasDecorator('mcpSubscriptions')) {
    throw new OptionsError(
      ErrorCode.AlreadyRegistered,
      `the plugin is already registered in this context or a parent of it (on ${fastify.mcpSubscriptions.path}); register it once per MCP route, in contexts that do not contain each other`,
    );
  }
  fastify.decorate('mcpSubscriptions', Object.freeze({ hub, handler, path }));

  const dispatchOptions: DispatchOptions<FastifyRequest> = {
    handler,
    principalOf: given(options.principal, defaultPrincipal),
    onListen: (request) => {
      // The open stream keeps its request (the engine's checks get it): the filter must not stay pinned
      // on it for the stream's lifetime.
      request.body = undefined;
    },
  };

  /** The MCP route's handler, behind listen: what is not ours reaches it in the same call, unchanged. */
  const inFront = (serveRest: RouteHandlerMethod): RouteHandlerMethod =>
    function mcpSubscriptions(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      if (request.method === 'POST') {
        const serving = dispatchRequest(
          { request, headers: request.headers, ...bodyInput(request.body) },
          dispatchOptions,
          // The engine writes Node's response itself (the SSE stream, or a JSON-RPC error): Fastify must
          // neither answer after this handler nor touch the response.
          () => takeOverReply(reply),
        );
        if (serving !== undefined) return serving;
      }
      return serveRest.call(this, request, reply);
    };

  let inFrontOf = 0;
  fastify.addHook('onRoute', (route) => {
    if (route.url !== path || !servesPost(route.method)) return;
    route.handler = inFront(route.handler);
    inFrontOf++;
  });

  fastify.addHook('onReady', function checkPlaced(ready) {
    if (inFrontOf > 0) {
      ready();
      return;
    }
    ready(
      this.hasRoute({ method: 'POST', url: path })
        ? routeNotPlaced(
            `POST ${path} was registered before the plugin loaded (or in a context it cannot see), so it would serve subscriptions/listen ` +
              'without its checks: `await app.register(mcpSubscriptions, …)` before adding your MCP route (a plugin loads ' +
              'only when awaited or at start-up, after routes added synchronously), in the same context as that route or a parent of it',
          )
        : routeNotPlaced(
            `Expected a route serving POST ${path} (your MCP handler) after the plugin, but there is none: ` +
              'subscriptions/listen would never be reached. Register your MCP route, or set `path` to its URL',
          ),
    );
  });

  // Fastify refuses a body over the route's bodyLimit with its own 413 and `Connection: close`, then
  // Node's server destroys the socket with the rest of the body unread: at a client still sending,
  // the reset discards the 413. On the MCP route the connection is half-closed after the answer instead.
  fastify.addHook('onError', (request, _reply, error, next) => {
    if ((error as { code?: unknown }).code === BODY_TOO_LARGE && request.routeOptions.url === path) {
      closeUnreadAfterAnswer(request.raw);
    }
    next();
  });

  // Every open stream ends with its terminal result before the server closes (it could not close with
  // streams open on it). The hub is the caller's: its streams are completed, the hub is left open.
  fastify.addHook('preClose', (closed) => {
    hub.complete().then(() => closed(), closed);
  });
}

const plugin: FastifyPluginCallback<McpSubscriptionsFastifyOptions> = (fastify, options, done) => {
  // A callback plugin's mistakes go to `done()`: avvio does not catch a synchronous throw, which would
  // crash the process (an uncaught exception) instead of rejecting `register()` and `ready()`.
  try {
    setUp(fastify, options);
  } catch (error) {
    done(error as Error);
    return;
  }
  done();
};

/**
 * The Fastify plugin: serves `subscriptions/listen` (and `notifications/cancelled` for its streams) on
 * your MCP route, in front of its handler, after the route's own hooks (your auth). Register it before
 * your MCP route, in the same context or a parent of it; it decorates the instance with
 * `fastify.mcpSubscriptions` (`{ hub, handler, path }`). The app fails to start, with
 * `ERR_MCP_SUBSCRIPTIONS_ROUTE_NOT_PLACED`, when no route it can serve listen in front of is there.
 * On `fastify.close()` every open stream ends with its terminal result.
 *
 * @example
 * ```ts
 * const hub = new SubscriptionHub();
 * await app.register(mcpSubscriptions, { hub, capabilities: offer, canRead: (uri, { principal }) => mayRead(principal, uri) });
 * app.post('/mcp', { onRequest: authenticate }, (request, reply) => {
 *   reply.hijack();
 *   return mcpNode(Object.assign(request.raw, { auth: request.auth }), reply.raw, request.body); // the SDK reads `auth` there
 * });
 * hub.resourceUpdated('note://alice/todo');
 * ```
 */
export const mcpSubscriptions: FastifyPluginCallback<McpSubscriptionsFastifyOptions> = Object.assign(plugin, {
  // What `fastify-plugin` sets: no encapsulation (the hooks reach the app's routes), a name in Fastify's
  // plugin tree, and the Fastify versions it is written for (Fastify checks them at register).
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'mcp-subscriptions',
  [Symbol.for('plugin-meta')]: { name: 'mcp-subscriptions', fastify: '5.x' },
});

export default mcpSubscriptions;
export type { ListenHandlerOptions };
