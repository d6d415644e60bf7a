/**
 * Puts the listen route in front of the host's MCP route on Nest's Fastify platform.
 *
 * Fastify refuses two routes on one method and path (`FST_ERR_DUPLICATED_ROUTE`), so the listen route
 * cannot stand beside the host's as it does in Express's router. Through Fastify's own `onRoute` hook,
 * installed before Nest registers any route:
 *
 * - the module's own route (found by its metadata) is registered with a route constraint of its own,
 *   which no request derives while the host has an MCP route: it stays in Fastify's router, unreached,
 *   and lends its handler (Nest's, with the global guards, the module's `guards`, pipes, interceptors
 *   and exception filters, exactly as on Express) to the host's route;
 * - the handler of the host's route for the same URL (POST) hands each request to that handler first,
 *   with the host's own handler as its `next()`: what is not listen goes on to it in the same call.
 *   The host's route keeps everything else of its own: its hooks, body limit, schema and config.
 *
 * When no other route serves POST on that URL, requests derive the constraint instead, and the module's
 * route serves on its own (anything not listen is answered 404, as Express would).
 *
 * A route for that URL registered on the Fastify instance before the hook was installed (before Nest's
 * routes) is out of reach: it would serve listen unchecked. It is reported once Nest has registered its
 * routes, before the app says it started, and, where a route of Nest's would duplicate it, in place of
 * Fastify's own `FST_ERR_DUPLICATED_ROUTE`, which would not say why or what to do.
 */
import type { IncomingMessage } from 'node:http';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants.js';
import { closeUnreadAfterAnswer } from '../../lib/internal.ts';
import { MCP_SUBSCRIPTIONS_ROUTE } from './mcp-subscriptions.constants.ts';

type Handler = (this: unknown, request: unknown, reply: unknown, next?: () => void) => unknown;

/** The parts of Fastify's route options this module reads and changes. */
interface RouteOptions {
  readonly url: string;
  readonly method: string | readonly string[];
  handler: Handler;
  constraints?: Record<string, unknown>;
}

/** The parts of a Fastify instance this module uses: public API only. */
export interface FastifyInstanceLike {
  addHook(name: 'onRoute', hook: (route: RouteOptions) => void): unknown;
  addHook(name: 'onReady', hook: (done: (error?: Error) => void) => void): unknown;
  addHook(
    name: 'onError',
    hook: (
      request: { readonly raw: IncomingMessage; readonly routeOptions: { readonly url?: string } },
      reply: unknown,
      error: unknown,
      done: () => void,
    ) => void,
  ): unknown;
  addConstraintStrategy(strategy: object): unknown;
  hasConstraintStrategy(name: string): boolean;
  hasRoute(route: { readonly method: string; readonly url: string }): boolean;
}

/** The constraint the module's own route carries (see the module doc). */
const CONSTRAINT = 'mcpSubscriptionsAlone';
const ALONE = 'alone';

function servesPost(method: RouteOptions['method']): boolean {
  return typeof method === 'string' ? method === 'POST' : method.includes('POST');
}

function isListenRoute(handler: unknown): boolean {
  return typeof handler === 'function' && Reflect.hasMetadata(MCP_SUBSCRIPTIONS_ROUTE, handler);
}

/** A controller's route: Nest copies the method's metadata onto the handler it registers. */
function isControllerRoute(handler: unknown): boolean {
  return (
    typeof handler === 'function' &&
    Reflect.hasMetadata(PATH_METADATA, handler) &&
    Reflect.hasMetadata(METHOD_METADATA, handler)
  );
}

/** A host route that may hand requests to listen: its URL, and whether it does (decided when Fastify is ready). */
interface HostRoute {
  readonly url: string;
  /** Registered by Nest for a controller, rather than on the Fastify instance directly. */
  readonly controller: boolean;
  inFront: boolean;
}

/**
 * A route for the MCP path that Fastify would refuse as a duplicate (`FST_ERR_DUPLICATED_ROUTE`), where one
 * of the two was registered on the Fastify instance outside Nest's routes: reported as the module's error.
 */
export interface FastifyConflict {
  /** The URL both routes serve `POST` on. */
  readonly url: string;
  /**
   * The route already there was registered before the module could see it (before Nest's routes); otherwise
   * both were seen, and one of them is not a controller's.
   */
  readonly unseen: boolean;
}

/** What {@link FastifyListenRoute.placement} reports once Fastify is ready. */
export interface FastifyPlacement {
  /** The listen route's URL (with Nest's global prefix). */
  readonly url: string;
  /** How many host routes for that URL hand requests to listen first (0: listen's route serves alone). */
  readonly inFrontOf: number;
  /**
   * A route for that URL exists that the module never saw (registered on the Fastify instance before
   * Nest's routes): it would serve listen unchecked, and no placement can change that.
   */
  readonly unseen: boolean;
}

/**
 * Listen's place on one Fastify instance. Constructed before Nest registers its routes (the module's
 * `configure()`); {@link check} runs once they are (`onModuleInit`), and the placement is final when
 * Fastify is ready.
 */
export class FastifyListenRoute {
  /** Nest's handler of the listen route, once Fastify has seen it. */
  private listen: Handler | undefined;
  private url: string | undefined;
  private alone = false;
  private readonly hosts: HostRoute[] = [];
  private readonly instance: FastifyInstanceLike;

  /**
   * @param path - the module's `path`, as given (`'/mcp'` or `'mcp'`): host routes whose URL ends with
   *   it are candidates until the listen route's own URL (with Nest's global prefix) is known.
   * @param onPlaced - told the placement when Fastify is ready, or the error that fails start-up.
   * @param onConflict - the error to throw, from Fastify's `route()`, in place of its duplicate route error.
   */
  constructor(
    instance: FastifyInstanceLike,
    path: string,
    private readonly onPlaced: (placement: FastifyPlacement) => Error | undefined,
    private readonly onConflict: (conflict: FastifyConflict) => Error,
  ) {
    this.instance = instance;
    const suffix = `/${path.replace(/^\/+|\/+$/g, '')}`;
    if (!instance.hasConstraintStrategy(CONSTRAINT)) {
      // A value per request, derived before routing: `alone` once the listen route serves on its own.
      // Requests of every route derive it (cheaply); only routes that carry the constraint consult it.
      const isAlone = (): boolean => this.alone;
      instance.addConstraintStrategy({
        name: CONSTRAINT,
        storage() {
          const handlers = new Map<string, unknown>();
          return {
            get: (value: string) => handlers.get(value) ?? null,
            set: (value: string, store: unknown) => void handlers.set(value, store),
          };
        },
        deriveConstraint: () => (isAlone() ? ALONE : undefined),
        mustMatchWhenDerived: false,
      });
    }
    instance.addHook('onRoute', (route) => {
      if (!servesPost(route.method)) return;
      if (isListenRoute(route.handler)) {
        this.takeListenRoute(route);
        return;
      }
      // Before the listen route is seen its URL is not known (Nest registers the root module's routes
      // first, with the global prefix): every route ending in the path is a candidate until then.
      if (this.url === undefined ? !route.url.endsWith(suffix) : route.url !== this.url) return;
      const controller = isControllerRoute(route.handler);
      this.refuseDuplicate(route, controller);
      const host: HostRoute = { url: route.url, controller, inFront: false };
      this.hosts.push(host);
      route.handler = this.inFront(route.handler, host);
    });
    instance.addHook('onReady', (done) => {
      done(this.place(instance));
    });
    // Fastify refuses a body over the route's bodyLimit with its own 413 and `Connection: close`, then
    // Node's server destroys the socket with the rest of the body unread: at a client still sending,
    // the reset discards the 413. On the MCP path the connection is half-closed after the answer instead.
    instance.addHook('onError', (request, _reply, error, done) => {
      if (
        (error as { code?: unknown }).code === 'FST_ERR_CTP_BODY_TOO_LARGE' &&
        request.routeOptions.url === this.url
      ) {
        closeUnreadAfterAnswer(request.raw);
      }
      done();
    });
  }

  /** Whether Nest registered the listen route (the failure to report when it did not is the caller's). */
  get found(): boolean {
    return this.listen !== undefined;
  }

  /**
   * Once Nest has registered its routes (before it says the app started): the error that fails start-up
   * when a route for the listen route's URL is there that the module never saw, and that no host route
   * can stand in front of. Fastify being ready would find the same, but only after Nest's start log.
   */
  check(): Error | undefined {
    const url = this.url;
    if (url === undefined || this.hosts.some((host) => host.url === url)) return undefined;
    return this.instance.hasRoute({ method: 'POST', url }) ? this.onConflict({ url, unseen: true }) : undefined;
  }

  /**
   * Throws the module's error, from Fastify's `route()` before it would throw its own, where `route` would
   * duplicate a route for its URL and one of the two was registered on the Fastify instance outside Nest's
   * routes. Two controllers' routes on one URL are left to Fastify's error: that is Nest's own duplicate.
   */
  private refuseDuplicate(route: RouteOptions, controller: boolean): void {
    const constrained = route.constraints !== undefined && Object.keys(route.constraints).length > 0;
    if (constrained || !this.instance.hasRoute({ method: 'POST', url: route.url })) return;
    const seen = this.hosts.filter((host) => host.url === route.url);
    if (seen.length === 0 || !controller || seen.some((host) => !host.controller)) {
      throw this.onConflict({ url: route.url, unseen: seen.length === 0 });
    }
  }

  private takeListenRoute(route: RouteOptions): void {
    const listen = route.handler;
    this.listen = listen;
    this.url = route.url;
    route.constraints = { ...route.constraints, [CONSTRAINT]: ALONE };
    // Serving alone, what is not listen has no other route to go on to.
    route.handler = function listenAlone(this: unknown, request, reply) {
      return listen.call(this, request, reply, () => (reply as { callNotFound(): void }).callNotFound());
    };
  }

  /** The host's handler, behind listen: listen's `next()` calls it, with the same request and reply. */
  private inFront(serveRest: Handler, host: HostRoute): Handler {
    const listenHandler = (): Handler | undefined => this.listen;
    return function mcpSubscriptionsInFront(this: unknown, request, reply) {
      const listen = listenHandler();
      if (!host.inFront || listen === undefined || (request as { method?: unknown }).method !== 'POST') {
        return serveRest.call(this, request, reply);
      }
      let rest: unknown;
      const passOn = (): void => {
        rest = serveRest.call(this, request, reply);
      };
      // Fastify waits on what the host's handler returns (a Nest handler's promise), not on listen's.
      return Promise.resolve(listen.call(this, request, reply, passOn)).then(() => rest);
    };
  }

  /** Decides, once every route is known, which host routes hand on to listen; the error that fails start-up. */
  private place(instance: FastifyInstanceLike): Error | undefined {
    const url = this.url;
    if (url === undefined) return undefined; // reported by the module at init
    let inFrontOf = 0;
    for (const host of this.hosts) {
      host.inFront = host.url === url;
      if (host.inFront) inFrontOf++;
    }
    const unseen = inFrontOf === 0 && instance.hasRoute({ method: 'POST', url });
    if (!unseen) this.alone = inFrontOf === 0;
    return this.onPlaced({ url, inFrontOf, unseen });
  }
}
