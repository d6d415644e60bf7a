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
  type InjectionToken,
  type OnModuleInit,
  type Type,
} from '@nestjs/common';
import { ExternalContextCreator, HttpAdapterHost, ModuleRef } from '@nestjs/core';
import {
  bodyWasParsed,
  CANCELLED_METHOD,
  createListenHandler,
  describeValue,
  ErrorCode,
  headerValue,
  isHub,
  LISTEN_METHOD,
  OptionsError,
  serveNodeRequest,
  SubscriptionHub,
  type ListenHandler,
  type NodeServeOptions,
  type ResourceCheck,
} from '../../lib/internal.ts';
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
import { detachedResponse, envelopeOf, readRequest, type ListenEnvelope } from './read-probe.ts';
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
  /** The listen request's id and `_meta` while its URIs are checked: the probe presents them to the guards. */
  private readonly envelopes = new WeakMap<McpRequest, ListenEnvelope>();
  private runGuards: GuardRun | undefined;
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
      // The read probes present the listen request's id and `_meta` to the guards.
      const envelope = envelopeOf(body);
      if (envelope !== undefined) this.envelopes.set(req, envelope);
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
    const headerMethod = headerValue(req.headers['mcp-method']);
    // Fast path: a request whose Mcp-Method names another method is not ours. Its body is read (by
    // serveNodeRequest) only when no body parser ran, so that the next route's guards see it as they
    // would behind one.
    if (
      bodyWasParsed(req) &&
      headerMethod !== undefined &&
      headerMethod !== LISTEN_METHOD &&
      headerMethod !== CANCELLED_METHOD
    ) {
      next();
      return;
    }
    try {
      const outcome = await serveNodeRequest(req, res, this.serveOptions);
      if (outcome === 'next') next();
    } finally {
      this.envelopes.delete(req);
    }
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
    const probe = readRequest(request, uri, this.envelopes.get(request));
    const response = (request as McpRequest & { res?: ServerResponse }).res;
    try {
      await run(probe, detachedResponse(probe, response), noop);
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
      provider = this.moduleRef.get(source.token as InjectionToken, { strict: false });
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

  /** The start-up failure for a listen route that cannot be placed, also logged as an error in the app's log. */
  private notPlaced(message: string): OptionsError {
    const error = new OptionsError(ErrorCode.RouteNotPlaced, message);
    this.logger.error(error.message);
    return error;
  }

  /**
   * Puts the listen route in front of the host's MCP route. Where it cannot be placed the host's route
   * would serve listen itself, past this module's checks, so that fails start-up (a platform other than
   * Express, or the route missing from the router: neither is a state a working app can be in), and a
   * handler outside Nest routing that shadows it is reported as an error (it may hand listen on).
   */
  private placeRoute(): void {
    const adapter = this.adapterHost?.httpAdapter;
    // A standalone application context (no HTTP server) has no route to place.
    if (adapter === undefined || adapter === null) return;
    if (adapter.getType() !== 'express') {
      throw this.notPlaced(
        `Expected the app to run on Nest's Express platform (@nestjs/platform-express), got ${adapter.getType()}: ` +
          "the listen route hands every other request on with Express's next(), and cannot be put in front of your MCP route",
      );
    }
    const placement = placeListenRoute(adapter.getInstance());
    if (!placement.found) {
      throw this.notPlaced(
        `Expected the listen route (POST ${this.route.path}) in the Express router, but it is not there: ` +
          'your MCP route would serve subscriptions/listen without its checks. Import McpSubscriptionsModule ' +
          'into the HTTP application, and report this if it is',
      );
    }
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
