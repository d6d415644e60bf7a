/**
 * The Nest face of the engine: turns a request on the listen route into the engine's inputs (body,
 * headers, principal, checks) and hands it the raw Node response. The SSE writer is the engine's.
 */
import type { ServerResponse } from 'node:http';
import {
  Inject,
  Injectable,
  ForbiddenException,
  Logger,
  type BeforeApplicationShutdown,
  type CanActivate,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { ExternalContextCreator, HttpAdapterHost, ModuleRef } from '@nestjs/core';
import {
  bodyInput,
  createListenHandler,
  describeValue,
  dispatchRequest,
  ErrorCode,
  isHub,
  OptionsError,
  serveNodeRequest,
  SubscriptionHub,
  takeOverReply,
  type ListenHandler,
  type NodeServeOptions,
  type ResourceCheck,
} from '../../lib/internal.ts';
import {
  FastifyListenRoute,
  type FastifyConflict,
  type FastifyInstanceLike,
  type FastifyPlacement,
} from './fastify-route.ts';
import {
  MCP_SUBSCRIPTIONS_READ_CONTEXT,
  MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS,
  MCP_SUBSCRIPTIONS_ROUTE_OPTIONS,
} from './mcp-subscriptions.constants.ts';
import type { McpCheckContext, McpReadContext, McpRequest } from './mcp-subscriptions.interfaces.ts';
import {
  tokenName,
  type HookName,
  type HookSource,
  type ResolvedModuleOptions,
  type ResolvedRouteOptions,
} from './mcp-subscriptions.options.ts';
import {
  detachedReply,
  detachedResponse,
  envelopeOf,
  readRequest,
  type FastifyReplyLike,
  type FastifyRequestLike,
  type ListenEnvelope,
} from './read-probe.ts';
import { runRouteGuards } from './read-guards.ts';
import { placeListenRoute } from './route-order.ts';

type Next = (error?: unknown) => void;
type GuardRun = (req: McpRequest, res: ServerResponse, next: Next) => Promise<unknown>;

/** An `HttpException` by shape (two copies of `@nestjs/common` still agree): a guard's "no". */
function isHttpException(error: unknown): boolean {
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { getStatus?: unknown }).getStatus === 'function' &&
    typeof (error as { getResponse?: unknown }).getResponse === 'function'
  );
}

const noop: Next = () => {};

/** The HTTP platforms the listen route can be put in front of the host's MCP route on. */
type Platform = 'express' | 'fastify';

/** While a listen request's URIs are checked: what the read probes present to the guards. */
interface ListenInFlight {
  readonly envelope: ListenEnvelope | undefined;
  /** The listen request's response (Express) or reply (Fastify): the probes get a detached copy. */
  readonly response: ServerResponse | FastifyReplyLike;
}

/**
 * Serves `subscriptions/listen` for the listen route of `McpSubscriptionsModule`, runs the per-URI
 * checks (the host's guards by default), and ends every open stream on application shutdown.
 */
@Injectable()
export class McpSubscriptionsService implements OnModuleInit, BeforeApplicationShutdown {
  /** The engine this service serves from (its resolved options are `handler.options`). */
  readonly handler: ListenHandler<McpRequest>;

  private readonly logger = new Logger('McpSubscriptions');
  private readonly serveOptions: NodeServeOptions<McpRequest>;
  private readonly sources: Readonly<Record<HookName, HookSource>>;
  private readonly hooks: Partial<Record<HookName, ResourceCheck<McpRequest>>> = {};
  /** The listen request's id, `_meta` and response while its URIs are checked: the probes present them to the guards. */
  private readonly inFlight = new WeakMap<McpRequest, ListenInFlight>();
  private runGuards: GuardRun | undefined;
  /** The HTTP platform, once the module is configured in an HTTP application. */
  private platform: Platform | undefined;
  private fastifyRoute: FastifyListenRoute | undefined;
  /** Whether the module built the hub (and so owns it) rather than being handed one. */
  private readonly ownsHub: boolean;

  constructor(
    @Inject(MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS) options: ResolvedModuleOptions,
    @Inject(SubscriptionHub) readonly hub: SubscriptionHub,
    @Inject(ModuleRef) private readonly moduleRef: ModuleRef,
    @Inject(ExternalContextCreator) private readonly contexts: ExternalContextCreator,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
    @Inject(MCP_SUBSCRIPTIONS_READ_CONTEXT) private readonly readContext: McpReadContext,
    @Inject(MCP_SUBSCRIPTIONS_ROUTE_OPTIONS) private readonly route: ResolvedRouteOptions,
  ) {
    const { where, listen, hooks, principal, maxBodyBytes } = options;
    this.ownsHub = !isHub(options.hub);
    const onListen = (req: McpRequest, body: unknown): void => {
      // The read probes present the listen request's id and `_meta` to the guards (its response is
      // recorded by serve()).
      const inFlight = this.inFlight.get(req);
      if (inFlight !== undefined) this.inFlight.set(req, { ...inFlight, envelope: envelopeOf(body) });
      // On Fastify the open stream keeps Fastify's request: the filter must not stay pinned on it.
      if (this.platform === 'fastify') req.body = undefined;
    };
    this.sources = hooks;
    // Providers given as hooks are resolved at module init, once every provider exists; the engine is
    // built (and validates its options) now, with hooks that call whatever was resolved.
    const late =
      (name: HookName): ResourceCheck<McpRequest> =>
      (item, context) => {
        const hook = this.hooks[name];
        if (hook === undefined) throw new Error(`${name} is not ready: the module has not initialized`);
        return hook(item, context);
      };
    this.handler = createListenHandler<McpRequest>(
      {
        ...listen,
        hub,
        // Without a read check of its own, the app's guards decide every URI.
        canRead: late('canRead'),
        ...(this.sources.handleSubscribeResource.kind !== 'none'
          ? { handleSubscribeResource: late('handleSubscribeResource') }
          : {}),
        ...(this.sources.canAccessTask.kind !== 'none' ? { canAccessTask: late('canAccessTask') } : {}),
      },
      { where },
    );
    this.serveOptions = { handler: this.handler, principalOf: principal, maxBodyBytes, onListen };
  }

  /**
   * Called by the module's `configure()`, in an HTTP application, before Nest registers any route:
   * refuses a platform the listen route cannot be put in front of the host's MCP route on (before that
   * platform could fail in a way that does not name this module), and on Fastify installs the route
   * hooks that put it there (fastify-route.ts).
   */
  prepareRoute(): void {
    const adapter = this.adapterHost?.httpAdapter;
    if (adapter === undefined || adapter === null || this.platform !== undefined) return;
    const type = adapter.getType();
    if (type !== 'express' && type !== 'fastify') {
      throw this.notPlaced(
        `Expected the app to run on Nest's Express or Fastify platform (@nestjs/platform-express, @nestjs/platform-fastify), got ${type}: ` +
          'the listen route cannot be put in front of your MCP route there',
      );
    }
    this.platform = type;
    if (type === 'fastify') {
      this.fastifyRoute = new FastifyListenRoute(
        adapter.getInstance<FastifyInstanceLike>(),
        this.route.path,
        (placement) => this.fastifyPlaced(placement),
        (conflict) => this.fastifyConflict(conflict),
      );
    }
  }

  /** Resolves provider hooks, prepares the guard run, and puts the listen route in front of the host's. */
  onModuleInit(): void {
    for (const name of ['canRead', 'handleSubscribeResource', 'canAccessTask'] as const) {
      const hook = this.resolveHook(name, this.sources[name]);
      if (hook !== undefined) this.hooks[name] = hook;
    }
    if (this.hooks.canRead === undefined) {
      this.runGuards = this.guardRun();
      this.hooks.canRead = (uri, context) => this.guardsAdmit(uri, context);
    }
    this.placeRoute();
  }

  /**
   * How a URI's read probe runs the guards that decide reads: `guards` alone (the default), or through
   * Nest's own guard pipeline, global guards first, with `readGuards: 'route-and-global'`.
   */
  private guardRun(): GuardRun {
    const { readContext } = this;
    if (this.route.readGuards === 'route') {
      const guards = this.route.guards.map((guard) => this.guardInstance(guard));
      const classRef = readContext.constructor as Type<unknown>;
      // eslint-disable-next-line @typescript-eslint/unbound-method -- only its identity is used (Reflector metadata).
      const handler = readContext.resourcesRead;
      return async (req, res, next) => {
        if (!(await runRouteGuards(guards, [req, res, next], classRef, handler))) throw new ForbiddenException();
      };
    }
    return this.contexts.create(
      this.readContext,
      // eslint-disable-next-line @typescript-eslint/unbound-method -- Nest applies it to `readContext`.
      this.readContext.resourcesRead,
      'resourcesRead',
      undefined,
      undefined,
      undefined,
      undefined,
      // Guards only: interceptors and filters belong to routes that answer clients; this one never does.
      { guards: true, interceptors: false, filters: false },
    ) as GuardRun;
  }

  /** A guard of `guards`: an instance as given; a class, the instance Nest made for the read context in this module. */
  private guardInstance(guard: Type<CanActivate> | CanActivate): CanActivate {
    if (typeof guard !== 'function') return guard;
    return this.moduleRef.get(guard, { strict: true });
  }

  /**
   * Ends every open stream with its terminal result before the HTTP server closes. A hub the module
   * built is closed (new streams refused, the bus left); a hub the caller passed in is theirs to close,
   * so only its streams are completed (the HTTP server could not close with streams open on it).
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.ownsHub) await this.hub.close();
    else await this.hub.complete();
  }

  /**
   * Serves one request on the listen route: listen and the cancellation of one of the caller's
   * streams; anything else goes on through `next()`, with its body where a body parser would leave it.
   */
  async serve(req: McpRequest, res: ServerResponse, next: Next): Promise<void> {
    // Whatever Mcp-Method says, the body decides too: a body naming listen under another header is ours
    // to refuse, not to pass on (docs/mount-order.md).
    this.inFlight.set(req, { envelope: undefined, response: res });
    try {
      if (this.platform === 'fastify') {
        await this.serveFastify(req as FastifyRequestLike, res as unknown as FastifyReplyLike, next);
        return;
      }
      const outcome = await serveNodeRequest(req, res, this.serveOptions);
      if (outcome === 'next') next();
    } finally {
      this.inFlight.delete(req);
    }
  }

  /**
   * The same on Nest's Fastify platform: Fastify has read the body already (under the route's
   * `bodyLimit`), and the engine writes Node's response under Fastify's reply, which is hijacked first
   * so that Fastify neither answers after the handler nor touches the response.
   */
  private async serveFastify(req: FastifyRequestLike, reply: FastifyReplyLike, next: Next): Promise<void> {
    const serving = dispatchRequest(
      { request: req, headers: req.headers, ...bodyInput(req.body) },
      this.serveOptions,
      () => takeOverReply(reply),
    );
    if (serving === undefined) next();
    else await serving;
  }

  /**
   * The default read check: every guard that decides reads (`guards`, after the global ones with
   * `readGuards: 'route-and-global'`) must let a
   * `resources/read` of `uri` by the same caller through. A guard's `false` or `HttpException` is a
   * silent "no"; any other error is a failure the engine logs (and the URI is left out as well).
   */
  private async guardsAdmit(uri: string, { request }: McpCheckContext): Promise<boolean> {
    const run = this.runGuards;
    if (run === undefined) throw new Error('the guards are not ready: the module has not initialized');
    const inFlight = this.inFlight.get(request);
    const probe = readRequest(request, uri, inFlight?.envelope);
    const response =
      this.platform === 'fastify' && inFlight !== undefined
        ? (detachedReply(
            probe as FastifyRequestLike,
            inFlight.response as FastifyReplyLike,
          ) as unknown as ServerResponse)
        : detachedResponse(probe, inFlight?.response as ServerResponse | undefined);
    try {
      await run(probe, response, noop);
      return true;
    } catch (error) {
      if (isHttpException(error)) return false;
      throw error;
    }
  }

  private resolveHook(name: HookName, source: HookSource): ResourceCheck<McpRequest> | undefined {
    if (source.kind === 'none') return undefined;
    if (source.kind === 'function') return source.check;
    let provider: unknown;
    try {
      provider = this.moduleRef.get(source.token, { strict: false });
    } catch {
      throw new OptionsError(
        ErrorCode.InvalidHook,
        `Expected a provider for \`${tokenName(source.token)}\` (given as \`${name}\`) to be registered in a module of the application`,
      );
    }
    const method = (provider as Record<string, unknown> | undefined)?.[name];
    if (typeof method !== 'function') {
      throw new OptionsError(
        ErrorCode.InvalidHook,
        `Expected the provider \`${tokenName(source.token)}\` given as \`${name}\` to have a \`${name}()\` method, got ${describeValue(provider)}`,
      );
    }
    return (item, context) => (method as ResourceCheck<McpRequest>).call(provider, item, context);
  }

  private notFound(where: string): OptionsError {
    return this.notPlaced(
      `Expected the listen route (POST ${this.route.path}) ${where}, but it is not there: ` +
        'your MCP route would serve subscriptions/listen without its checks. Import McpSubscriptionsModule ' +
        'into the HTTP application, and report this if it is',
    );
  }

  /** Fastify is ready: says where listen is served, or the error that fails start-up. */
  private fastifyPlaced({ url, inFrontOf, unseen }: FastifyPlacement): Error | undefined {
    if (unseen) return this.fastifyConflict({ url, unseen });
    const ahead =
      inFrontOf === 0
        ? 'no other route serves that path'
        : `in front of ${inFrontOf === 1 ? 'the route' : `${inFrontOf} routes`} serving everything else there, which hand${inFrontOf === 1 ? 's' : ''} each request to listen first`;
    this.logger.log(`subscriptions/listen is served on POST ${url}: ${ahead}`);
    return undefined;
  }

  /**
   * A route for the MCP path registered on the Fastify instance outside Nest's routes (the SDK's handler
   * mounted there, say): either it came first, and the module can put listen in front of nothing it never
   * saw, or it duplicates a controller's route, which Fastify refuses with an error that names neither.
   */
  private fastifyConflict({ url, unseen }: FastifyConflict): OptionsError {
    const servedBy = unseen
      ? "a route registered on the Fastify instance outside Nest's routes, before them, which the module cannot put listen in front of"
      : "both a controller route and a route registered on the Fastify instance outside Nest's routes, which Fastify refuses (FST_ERR_DUPLICATED_ROUTE)";
    return this.notPlaced(
      `POST ${url} is served by ${servedBy}: a route outside Nest's (such as the SDK's handler mounted on the adapter) ` +
        'would serve subscriptions/listen without its checks. Serve MCP from a controller route only, and remove the ' +
        `route added to the Fastify instance (docs/nest.md, "On Nest's Fastify platform")`,
    );
  }

  /** The start-up failure for a listen route that cannot be placed, also logged as an error in the app's log. */
  private notPlaced(message: string): OptionsError {
    const error = new OptionsError(ErrorCode.RouteNotPlaced, message);
    this.logger.error(error.message);
    return error;
  }

  /**
   * Puts the listen route in front of the host's MCP route, once Nest has registered every route. Where
   * it cannot be placed the host's route would serve listen itself, past this module's checks, so that
   * fails start-up (the route missing from the router: not a state a working app can be in), and a
   * handler outside Nest routing that shadows it is reported as an error (it may hand listen on). On
   * Fastify the hooks of prepareRoute() placed it as Nest registered the routes.
   */
  private placeRoute(): void {
    const adapter = this.adapterHost?.httpAdapter;
    // A standalone application context (no HTTP server) has no route to place.
    if (adapter === undefined || adapter === null) return;
    // Configured apps were prepared already; an app whose modules were never configured is still checked.
    this.prepareRoute();
    if (this.platform === 'fastify') {
      if (this.fastifyRoute?.found !== true) throw this.notFound('in the Fastify router');
      // Now, not when Fastify is ready: that is only once Nest has said the app started.
      const conflict = this.fastifyRoute.check();
      if (conflict !== undefined) throw conflict;
      return;
    }
    const placement = placeListenRoute(adapter.getInstance());
    if (!placement.found) throw this.notFound('in the Express router');
    // Nest's own route log lists the host's MCP route first (its module registers first): say
    // where listen is really served, so that log does not read as if ours were shadowed.
    const ahead =
      placement.movedBefore === 0
        ? 'no other controller route serves that path'
        : `moved in front of ${placement.movedBefore} other controller route${placement.movedBefore === 1 ? '' : 's'} for that path, which serve${placement.movedBefore === 1 ? 's' : ''} everything else`;
    this.logger.log(`subscriptions/listen is served on POST ${placement.path ?? '(unknown path)'}: ${ahead}`);
    if (placement.shadowedBy > 0) {
      this.logger.error(
        'POST on the MCP path is also served by a handler mounted on the HTTP adapter outside Nest routing ' +
          "(such as @rekog/mcp-nest's self-mounted transport), which runs before every controller route: it " +
          'answers subscriptions/listen itself, past this module and your guards. Serve MCP from a controller ' +
          'instead (with @rekog/mcp-nest: a controller extending McpHttpControllerFor(transport)).',
      );
    }
  }
}
