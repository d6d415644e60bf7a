/**
 * Options and extension points of `McpSubscriptionsModule`.
 */
import type { IncomingMessage } from 'node:http';
import type {
  CanActivate,
  InjectionToken,
  ModuleMetadata,
  OptionalFactoryDependency,
  Provider,
  Type,
} from '@nestjs/common';
import type {
  CheckContext,
  ListenHandlerOptions,
  NodeAdapterOptions,
  ResourceCheck,
  SubscriptionHub,
  SubscriptionHubOptions,
} from '../../lib/internal.ts';

/**
 * The request the module sees: on Nest's Express platform Node's request plus what body parsers and
 * auth guards leave on it; on the Fastify platform Fastify's request, whose `headers`, `body`, `user` and
 * `auth` are the same fields (and `raw` Node's request). Only these fields are read, so no Express or
 * Fastify types are needed.
 */
export type McpRequest = IncomingMessage & {
  body?: unknown;
  /** The SDK's `AuthInfo` (`requireBearerAuth`, or your guard). */
  auth?: unknown;
  /** Passport's user, or your guard's. */
  user?: unknown;
};

/** What a check or hook is told: the caller's principal, the request, and an abort signal. */
export type McpCheckContext = CheckContext<McpRequest>;

/** Which guards decide a read: see `McpSubscriptionsRouteOptions.readGuards`. */
export type McpReadGuards = 'route' | 'route-and-global';

/** The class and method the host's guards see (`context.getClass()`, `getHandler()`) when they decide a URI. */
export interface McpReadContext {
  /** What a guard's `canActivate` guards here: the `resources/read` of one URI. Never called by a client. */
  resourcesRead(): boolean;
}

/** A provider that decides whether the caller may read a URI: the alternative to reusing guards. */
export interface McpResourceReadCheck {
  /** Only `true` admits the URI; `false`, a throw, a rejection or a timeout leaves it out silently. */
  canRead(uri: string, context: McpCheckContext): boolean | PromiseLike<boolean>;
}

/** The subscribe hook as a provider (ConduitMCP's `handle_subscribe_resource`): run after the read check passed. */
export interface McpSubscribeResourceHandler {
  /** Only `true` admits the URI: a scheme you serve, a resource you can watch. */
  handleSubscribeResource(uri: string, context: McpCheckContext): boolean | PromiseLike<boolean>;
}

/** Tasks extension: does the caller own a task (an unknown id and a foreign one must both answer `false`)? */
export interface McpTaskAccessCheck {
  canAccessTask(taskId: string, context: McpCheckContext): boolean | PromiseLike<boolean>;
}

/**
 * A hook given as a provider: the injection token of a provider with the method of the hook's name
 * (a class, a string or a symbol), as Nest's `useExisting` names one. The module does not build it: it
 * takes the instance registered in a module of the application when it initializes, so the provider
 * may depend on services that themselves inject the hub.
 * @example
 * ```ts
 * McpSubscriptionsModule.forRoot({ capabilities, canRead: { useExisting: NoteReadCheck } })
 * // with NoteReadCheck (an @Injectable() with canRead(uri, context)) in some module's providers
 * ```
 */
export interface McpHookProvider<Provider> {
  /** The token of the provider whose method of the hook's name is the hook. */
  readonly useExisting: InjectionToken<Provider>;
}

/**
 * A hook: a function (as the Express middleware takes it), or `{ useExisting: token }` for a provider
 * with the method of the same name ({@link McpHookProvider}). A class given bare is refused with an
 * `OptionsError` (`ERR_MCP_SUBSCRIPTIONS_INVALID_HOOK`) saying how to write it: a class is a provider's
 * token, never a function to call.
 */
export type McpHook<Provider> = ResourceCheck<McpRequest> | McpHookProvider<Provider>;

/**
 * The options a `forRoot()` call or a `forRootAsync()` factory provides: the engine's listen options
 * (see `createListenHandler` in `mcp-subscriptions`), with the hub built by the module and hooks that
 * may be providers.
 */
export interface McpSubscriptionsOptions
  extends
    Omit<ListenHandlerOptions<McpRequest>, 'hub' | 'canRead' | 'handleSubscribeResource' | 'canAccessTask'>,
    NodeAdapterOptions<McpRequest> {
  /**
   * The hub's options (the module builds it and provides it as `SubscriptionHub`), or a hub you built
   * (for example to hand the same one to code outside Nest). The module closes only a hub it built: on
   * application shutdown it ends every open stream with its terminal result, refuses new ones and leaves
   * the bus. A hub you pass in stays yours: on shutdown the module ends its open streams (so the HTTP
   * server can close) but does not close it; call `hub.close()` when you are done with it.
   * @default `new SubscriptionHub()`, logging through Nest's `Logger`
   */
  readonly hub?: SubscriptionHub | SubscriptionHubOptions;
  /**
   * The per-URI read check. Left out, the module reuses your guards: for each URI it runs `guards`
   * (and the global guards too, with `readGuards: 'route-and-global'`) with a request that presents a
   * `resources/read` of that URI by the same caller, and admits the URI only if every guard lets it
   * through. Give a function, or `{ useExisting: YourReadCheck }` for a provider (`McpResourceReadCheck`),
   * when your read rule is not a guard.
   * With `capabilities.resourceSubscriptions` on, either this or a guard that decides reads is required:
   * without both the module refuses to start (`ERR_MCP_SUBSCRIPTIONS_NO_READ_CHECK`), since an
   * authentication guard alone would admit every URI.
   * @default the guards that decide reads (see `readGuards`)
   */
  readonly canRead?: McpHook<McpResourceReadCheck>;
  /**
   * The subscribe hook, run after the read check passed: a function, or `{ useExisting: token }` for a
   * provider (`McpSubscribeResourceHandler`). @default accepts every readable URI
   */
  readonly handleSubscribeResource?: McpHook<McpSubscribeResourceHandler>;
  /**
   * Tasks extension: required when `capabilities.tasks` is on. A function, or `{ useExisting: token }`
   * for a provider (`McpTaskAccessCheck`).
   */
  readonly canAccessTask?: McpHook<McpTaskAccessCheck>;
}

/**
 * Options that shape the module itself (its listen route, the guards on it, its scope): the
 * `ConfigurableModuleBuilder` extras, given to `forRoot()` and `forRootAsync()` alike, never returned
 * by a factory.
 */
export interface McpSubscriptionsRouteOptions {
  /**
   * The host's MCP path. The listen route is a controller route on it (under the global prefix, like
   * every controller), served in front of whatever route serves the rest of MCP there.
   * @default '/mcp'
   */
  readonly path?: string;
  /**
   * The guards of your MCP route, beyond the global ones (`APP_GUARD`, `useGlobalGuards()`), which
   * apply anyway. The listen route runs them exactly as Nest runs a controller's `@UseGuards()`, and so
   * does the per-URI read check (in this order, each must let a `resources/read` of the URI through). A
   * class is instantiated in this module, as Nest does for a controller's guards: its dependencies must
   * be global or come from `imports`.
   * @default []
   */
  readonly guards?: readonly (Type<CanActivate> | CanActivate)[];
  /**
   * Which guards decide whether the caller may read each URI a listen request names (when `canRead`
   * is not given):
   * - `'route'`: only `guards`. The global guards (`APP_GUARD`, `useGlobalGuards()`) run once, on the
   *   listen request itself, as on every route: they authenticate the caller, rate-limit the request,
   *   and so on, but are not asked again per URI. A rate-limit guard such as `@nestjs/throttler`'s
   *   then counts one listen as one request, and its refusal is the listen request's 429.
   * - `'route-and-global'`: the global guards too, before `guards`, once per URI. Choose it when a
   *   global guard decides `resources/read`; a global guard that counts requests (a throttler) then
   *   counts each URI, and once it refuses, every further URI is left out.
   *
   * A global guard that decides reads can also be named in `guards` with the default.
   * @default 'route'
   */
  readonly readGuards?: McpReadGuards;
  /** Make `SubscriptionHub` injectable in every module without importing this one. @default true */
  readonly isGlobal?: boolean;
}

/** Options of `McpSubscriptionsModule.forRoot()`. Unknown keys are refused when `forRoot()` is called. */
export interface McpSubscriptionsModuleOptions extends McpSubscriptionsOptions, McpSubscriptionsRouteOptions {}

/**
 * A class that provides the options, for `forRootAsync({ useClass })` and `forRootAsync({ useExisting })`
 * (the builder's options factory, with this method name).
 */
export interface McpSubscriptionsOptionsFactory {
  /** The options, as `forRoot()` would take them without `path`, `guards`, `readGuards` and `isGlobal`. */
  createMcpSubscriptionsOptions(): McpSubscriptionsOptions | Promise<McpSubscriptionsOptions>;
}

/**
 * Options of `McpSubscriptionsModule.forRootAsync()`: exactly one of `useFactory`, `useClass`,
 * `useExisting` provides the options; `path`, `guards`, `readGuards` and `isGlobal` shape the module, so
 * they are given here. Unknown keys are refused when `forRootAsync()` is called, and unknown keys in the options
 * the factory returns when the application starts.
 */
export interface McpSubscriptionsModuleAsyncOptions
  extends McpSubscriptionsRouteOptions, Pick<ModuleMetadata, 'imports'> {
  /** Providers passed to `useFactory`, in order. @default [] */
  readonly inject?: (InjectionToken | OptionalFactoryDependency)[];
  /** Returns the options (or a Promise of them), given the providers named in `inject`. */
  // Nest's own `FactoryProvider` types its factory so, to accept any injected parameters.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly useFactory?: (...args: any[]) => McpSubscriptionsOptions | Promise<McpSubscriptionsOptions>;
  /** A class the module instantiates (with its dependencies) to call its `createMcpSubscriptionsOptions()`. */
  readonly useClass?: Type<McpSubscriptionsOptionsFactory>;
  /** The token of a provider, from `imports` or a global module, whose `createMcpSubscriptionsOptions()` is called. */
  readonly useExisting?: InjectionToken<McpSubscriptionsOptionsFactory>;
  /**
   * Providers of the parent module from which those named in `inject` (and what they inject) are
   * copied into this module: Nest's way to hand a factory a provider the parent does not export.
   * @default none
   */
  readonly provideInjectionTokensFrom?: Provider[];
  /** More providers for this module (what `useClass` or a guard needs). @default [] */
  readonly extraProviders?: Provider[];
}
