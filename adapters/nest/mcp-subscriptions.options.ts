/**
 * Validation of the module's options, in the engine's manner: each mistake throws an `OptionsError`
 * with the code of its check and a message naming the field; an unknown key is refused with the
 * nearest known one suggested, or with where it belongs (`maxSubscriptions` goes under `hub`, `guards` beside
 * `useFactory`). The engine's own checks (capabilities, bounds, durations, the hub's options) run here
 * too, through the engine's resolvers: options known up front fail when `forRoot()` is called, the
 * options a factory returns when the application starts.
 */
import type { InjectionToken } from '@nestjs/common';
import {
  DEFAULT_MAX_BODY_BYTES,
  defaultPrincipal,
  describeValue,
  ErrorCode,
  HUB_OPTION_KEYS,
  knownKeys,
  LISTEN_OPTION_KEYS,
  NODE_ADAPTER_OPTION_KEYS,
  nearestKey,
  oneOf,
  optionalFunction,
  optionKeys,
  OptionsError,
  optionsObject,
  positiveInteger,
  REMOVED_HUB_OPTIONS,
  removedOptions,
  resolveHubOptions,
  checkListenOptions,
  defineCapabilities,
  isHub,
  isPlainObject,
  type Hub,
  type ListenHandlerOptions,
  type ListenOptionsScope,
  type ResourceCheck,
  type SubscriptionHub,
  type SubscriptionHubOptions,
} from '../../lib/internal.ts';
import { DEFAULT_MCP_PATH, OPTIONS_FACTORY_METHOD } from './mcp-subscriptions.constants.ts';
import type {
  McpHookProvider,
  McpReadGuards,
  McpRequest,
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsOptions,
  McpSubscriptionsRouteOptions,
} from './mcp-subscriptions.interfaces.ts';

/** The hooks that may be given as a function or as a provider's token. */
export type HookName = 'canRead' | 'handleSubscribeResource' | 'canAccessTask';

const HOOK_NAMES: readonly HookName[] = ['canRead', 'handleSubscribeResource', 'canAccessTask'];

// The entry points, as messages name them.
const FOR_ROOT = 'McpSubscriptionsModule.forRoot()';
const FOR_ROOT_ASYNC = 'McpSubscriptionsModule.forRootAsync()';

/** The extras of the module definition: what shapes the module. */
export const ROUTE_OPTION_KEYS = optionKeys<McpSubscriptionsRouteOptions>({
  path: true,
  guards: true,
  readGuards: true,
  isGlobal: true,
});

/** What `forRoot()` takes besides the extras, and what a `forRootAsync()` factory returns. */
const MODULE_OPTION_KEYS: readonly string[] = [...LISTEN_OPTION_KEYS, ...NODE_ADAPTER_OPTION_KEYS];

export const ASYNC_OPTION_KEYS = optionKeys<McpSubscriptionsModuleAsyncOptions>({
  imports: true,
  inject: true,
  useFactory: true,
  useClass: true,
  useExisting: true,
  provideInjectionTokensFrom: true,
  extraProviders: true,
  path: true,
  guards: true,
  readGuards: true,
  isGlobal: true,
});

/** The module's keys beyond the engine's listen options. */
const NEST_KEYS = MODULE_OPTION_KEYS.filter((key) => !LISTEN_OPTION_KEYS.includes(key));

/** The engine's listen options the module hands on as given (the hub and the hooks it supplies itself). */
const ENGINE_KEYS = LISTEN_OPTION_KEYS.filter((key) => key !== 'hub' && !(HOOK_NAMES as string[]).includes(key));

type Hints = Readonly<Record<string, string>>;

function hintEach(keys: readonly string[], hint: (key: string) => string): Hints {
  return Object.fromEntries(keys.map((key) => [key, hint(key)]));
}

/** In Nest the module builds the hub: its options go under `hub` (`logger` is a listen option as well). */
const HUB_HINTS = hintEach(
  HUB_OPTION_KEYS.filter((key) => !MODULE_OPTION_KEYS.includes(key)),
  (key) => `it is an option of the hub, which the module builds: give it as \`hub: { ${key}: … }\``,
);

const ASYNC_ONLY_HINTS = hintEach(
  ASYNC_OPTION_KEYS.filter((key) => !ROUTE_OPTION_KEYS.includes(key)),
  () => `it is an option of ${FOR_ROOT_ASYNC}`,
);

const FACTORY_RESULT_HINTS = hintEach(
  MODULE_OPTION_KEYS,
  () =>
    `it is one of the options the factory returns (\`useFactory\`, or \`${OPTIONS_FACTORY_METHOD}()\` of \`useClass\` or \`useExisting\`), not an option of ${FOR_ROOT_ASYNC} itself`,
);

const ROUTE_HINTS = hintEach(
  ROUTE_OPTION_KEYS,
  () => `it shapes the module, so it is given to ${FOR_ROOT_ASYNC} itself, beside \`useFactory\``,
);

/**
 * `hints` plus a "did you mean" for each unknown key of `options` that is no typo of a known key but is
 * one of a key that belongs elsewhere: `maxSubscription` given to `forRoot()` points to `hub: { maxSubscriptions }`.
 */
function withNearMisses(options: object, known: readonly string[], hints: Hints): Hints {
  const elsewhere = Object.keys(hints);
  const more: Record<string, string> = {};
  for (const key of Object.keys(options)) {
    if (known.includes(key) || elsewhere.includes(key) || nearestKey(key, known) !== undefined) continue;
    const near = nearestKey(key, elsewhere);
    if (near !== undefined) more[key] = `did you mean \`${near}\`? ${hints[near]}`;
  }
  return { ...hints, ...more };
}

/** Where a set of module options comes from, for the messages of its checks. */
export interface OptionsSource {
  /** Names the options in unknown-key messages: `Unknown option \`x\` of <where>`. */
  readonly where: string;
  /** Names the options as a whole: `Expected <subject> to be an object`. */
  readonly subject: string;
  /** Keys the source takes besides the module options (the extras, for `forRoot()`). */
  readonly extraKeys: readonly string[];
  /** Keys that belong elsewhere, each with a hint saying where. */
  readonly elsewhere: Hints;
}

/** The options of `forRoot()`. */
export const FOR_ROOT_SOURCE: OptionsSource = Object.freeze({
  where: FOR_ROOT,
  subject: `the options of ${FOR_ROOT}`,
  extraKeys: ROUTE_OPTION_KEYS,
  elsewhere: { ...HUB_HINTS, ...ASYNC_ONLY_HINTS },
});

/** The options a `forRootAsync()` factory returns: `useFactory`, or the factory class's method. */
export function factorySource(options: McpSubscriptionsModuleAsyncOptions): OptionsSource {
  const factory = options.useClass ?? options.useExisting;
  const where =
    options.useFactory !== undefined || factory === undefined
      ? `the options returned by the useFactory of ${FOR_ROOT_ASYNC}`
      : `the options returned by ${tokenName(factory)}.${OPTIONS_FACTORY_METHOD}()`;
  return Object.freeze({
    where,
    subject: where,
    extraKeys: [],
    elsewhere: { ...HUB_HINTS, ...ROUTE_HINTS, ...ASYNC_ONLY_HINTS },
  });
}

/** A token as messages name it: a class by its name, anything else as `String()` shows it. */
export function tokenName(token: unknown): string {
  return typeof token === 'function' ? token.name : String(token);
}

/** Route options after defaults and validation. */
export interface ResolvedRouteOptions {
  readonly path: string;
  readonly guards: NonNullable<McpSubscriptionsRouteOptions['guards']>;
  readonly readGuards: McpReadGuards;
  readonly isGlobal: boolean;
}

const READ_GUARDS: readonly McpReadGuards[] = ['route', 'route-and-global'];

/** Validates what shapes the module (path, guards, readGuards, isGlobal); applies defaults. */
export function resolveRouteOptions(options: McpSubscriptionsRouteOptions): ResolvedRouteOptions {
  optionsObject(options);
  const path = options.path ?? DEFAULT_MCP_PATH;
  if (typeof path !== 'string' || path.trim() === '') {
    throw new OptionsError(
      ErrorCode.InvalidPath,
      `Expected \`path\` to be a non-empty string like '/mcp', got ${describeValue(path)}`,
    );
  }
  const guards: unknown = options.guards ?? [];
  if (!Array.isArray(guards)) {
    throw new OptionsError(
      ErrorCode.InvalidGuard,
      `Expected \`guards\` to be an array of guards, got ${describeValue(guards)}`,
    );
  }
  guards.forEach((guard: unknown, i) => {
    const isClass = typeof guard === 'function';
    const isInstance =
      typeof guard === 'object' &&
      guard !== null &&
      typeof (guard as { canActivate?: unknown }).canActivate === 'function';
    if (!isClass && !isInstance) {
      throw new OptionsError(
        ErrorCode.InvalidGuard,
        `Expected \`guards[${i}]\` to be a guard class or an object with \`canActivate()\`, got ${describeValue(guard)}`,
      );
    }
  });
  const readGuards = oneOf('readGuards', options.readGuards ?? 'route', READ_GUARDS);
  const isGlobal = options.isGlobal ?? true;
  if (typeof isGlobal !== 'boolean') {
    throw new OptionsError(
      ErrorCode.NotBoolean,
      `Expected \`isGlobal\` to be a boolean, got ${describeValue(isGlobal)}`,
    );
  }
  return Object.freeze({
    path,
    guards: Object.freeze([...(guards as ResolvedRouteOptions['guards'])]),
    readGuards,
    isGlobal,
  });
}

/**
 * Whether a function handed where a hook function belongs is a class, for the error that says how to
 * give it instead. The caller says which a hook is (`{ useExisting }` for a provider), so this only
 * catches the mistake, and reads no source text: an ES class (and a class down-levelled by Babel) has a
 * read-only `prototype`; a class compiled to ES5 has methods on its prototype, or a parent class; and a
 * decorated one (`@Injectable()`) carries Reflect metadata. Arrows, async and bound functions have no
 * `prototype` at all, and a plain `function` none of these.
 */
function looksLikeClass(value: (...args: never[]) => unknown): boolean {
  const descriptor = Object.getOwnPropertyDescriptor(value, 'prototype');
  if (descriptor === undefined) return false;
  if (descriptor.writable === false) return true;
  const prototype: unknown = descriptor.value;
  if (typeof prototype === 'object' && prototype !== null) {
    if (Object.getOwnPropertyNames(prototype).some((key) => key !== 'constructor')) return true;
    const parent = Object.getPrototypeOf(prototype) as { constructor?: unknown } | null;
    // A generator function's prototype inherits too, but from an object whose `constructor` is no class.
    if (
      parent !== null &&
      parent !== Object.prototype &&
      typeof parent.constructor === 'function' &&
      parent.constructor.prototype === parent
    ) {
      return true;
    }
  }
  return typeof Reflect.getOwnMetadataKeys === 'function' && Reflect.getOwnMetadataKeys(value).length > 0;
}

/** Checks the options of `forRootAsync()` when it is called (the options the factory returns are checked at start-up). */
export function checkAsyncOptions(options: McpSubscriptionsModuleAsyncOptions): void {
  optionsObject(options, `the options of ${FOR_ROOT_ASYNC}`);
  const elsewhere = { ...HUB_HINTS, ...FACTORY_RESULT_HINTS };
  removedOptions(options, REMOVED_HUB_OPTIONS, FOR_ROOT_ASYNC);
  knownKeys(options, ASYNC_OPTION_KEYS, FOR_ROOT_ASYNC, withNearMisses(options, ASYNC_OPTION_KEYS, elsewhere));
  const given = (['useFactory', 'useClass', 'useExisting'] as const).filter((key) => options[key] !== undefined);
  if (given.length !== 1) {
    throw new OptionsError(
      ErrorCode.InvalidAsyncOptions,
      `Expected exactly one of \`useFactory\`, \`useClass\` or \`useExisting\` in forRootAsync(), got ${given.length === 0 ? 'none' : given.map((key) => `\`${key}\``).join(' and ')}`,
    );
  }
  if (options.useFactory !== undefined && typeof options.useFactory !== 'function') {
    throw new OptionsError(
      ErrorCode.NotFunction,
      `Expected \`useFactory\` to be a function, got ${describeValue(options.useFactory)}`,
    );
  }
  checkFactoryClass('useClass', options.useClass, false);
  checkFactoryClass('useExisting', options.useExisting, true);
  for (const key of ['imports', 'inject', 'provideInjectionTokensFrom', 'extraProviders'] as const) {
    const value: unknown = options[key];
    if (value !== undefined && !Array.isArray(value)) {
      throw new OptionsError(
        ErrorCode.InvalidAsyncOptions,
        `Expected \`${key}\` of ${FOR_ROOT_ASYNC} to be an array, got ${describeValue(value)}`,
      );
    }
  }
}

/**
 * `useClass` must be a class with the factory method; `useExisting` may also be a string or symbol
 * token, whose provider is only known at start-up.
 */
function checkFactoryClass(key: 'useClass' | 'useExisting', value: unknown, tokenAllowed: boolean): void {
  if (value === undefined) return;
  if (tokenAllowed && (typeof value === 'string' || typeof value === 'symbol')) return;
  // Arrows and async functions have no `prototype`: they cannot be instantiated.
  if (typeof value !== 'function' || value.prototype === undefined) {
    throw new OptionsError(
      ErrorCode.InvalidAsyncOptions,
      `Expected \`${key}\` to be a class implementing McpSubscriptionsOptionsFactory${tokenAllowed ? ' or the token of a provider' : ''}, got ${describeValue(value)}`,
    );
  }
  const method = (value as { prototype?: Record<string, unknown> }).prototype?.[OPTIONS_FACTORY_METHOD];
  if (typeof method !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidAsyncOptions,
      `Expected the class \`${tokenName(value)}\` given as \`${key}\` to have a \`${OPTIONS_FACTORY_METHOD}()\` method (McpSubscriptionsOptionsFactory)`,
    );
  }
}

/** A hook as given: nothing, a function, or the token of a provider to resolve at module init. */
export type HookSource =
  | { readonly kind: 'none' }
  | { readonly kind: 'function'; readonly check: ResourceCheck<McpRequest> }
  | { readonly kind: 'provider'; readonly token: InjectionToken };

const HOOK_PROVIDER_KEYS = optionKeys<McpHookProvider<unknown>>({ useExisting: true });

/** A token as code spells it, for messages that show how to write a hook: a class by name, a string quoted. */
function tokenSource(token: string | symbol | ((...args: never[]) => unknown)): string {
  if (typeof token === 'string') return `'${token}'`;
  if (typeof token === 'symbol') return 'YOUR_TOKEN';
  return token.name === '' ? 'YourProvider' : token.name;
}

/**
 * Reads a hook as the caller's types say it: a function is the hook itself; `{ useExisting: token }`
 * names a provider with the hook's method. A class or a token given bare is refused, with how to write
 * it (a class called as a function would fail at every URI).
 */
export function hookSource(name: HookName, value: unknown): HookSource {
  if (value === undefined) return { kind: 'none' };
  const expected = `Expected \`${name}\` to be a function or \`{ useExisting: <token> }\` (a provider with a \`${name}()\` method)`;
  if (typeof value === 'function') {
    const fn = value as (...args: never[]) => unknown;
    if (!looksLikeClass(fn)) return { kind: 'function', check: value as ResourceCheck<McpRequest> };
    throw new OptionsError(
      ErrorCode.InvalidHook,
      `${expected}, got the class \`${tokenName(fn)}\`: a class is a provider's token, not a function to call. Write \`${name}: { useExisting: ${tokenSource(fn)} }\`, with ${tokenSource(fn)} among a module's providers`,
    );
  }
  if (typeof value === 'string' || typeof value === 'symbol') {
    throw new OptionsError(
      ErrorCode.InvalidHook,
      `${expected}, got the token ${describeValue(value)}. Write \`${name}: { useExisting: ${tokenSource(value)} }\``,
    );
  }
  if (!isPlainObject(value)) throw new OptionsError(ErrorCode.InvalidHook, `${expected}, got ${describeValue(value)}`);
  const builds =
    'the module takes the provider registered in your modules and builds none: give its token as `useExisting`';
  knownKeys(value, HOOK_PROVIDER_KEYS, `\`${name}\``, { useClass: builds, useValue: builds, useFactory: builds });
  const token = value.useExisting;
  if (typeof token === 'string' || typeof token === 'symbol') return { kind: 'provider', token };
  if (typeof token !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidHook,
      `Expected \`${name}.useExisting\` to be the token of a provider (a class, a string or a symbol), got ${describeValue(token)}`,
    );
  }
  const method = (token as { prototype?: Record<string, unknown> }).prototype?.[name];
  if (typeof method !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidHook,
      `Expected the class \`${tokenName(token)}\` given as \`${name}.useExisting\` to have a \`${name}()\` method`,
    );
  }
  return { kind: 'provider', token: token as InjectionToken };
}

/** The engine's listen options the module hands on unchanged. */
export type EngineListenOptions = Omit<ListenHandlerOptions<McpRequest>, 'hub' | HookName>;

/** The module's options after defaults and validation: what the hub and the service are built from. */
export interface ResolvedModuleOptions {
  /** Where the options came from, for the engine's messages. */
  readonly where: string;
  readonly listen: EngineListenOptions;
  /** The hub given, or the (validated) options to build it from. */
  readonly hub: SubscriptionHub | SubscriptionHubOptions;
  readonly hooks: Readonly<Record<HookName, HookSource>>;
  readonly principal: (req: McpRequest) => string | undefined;
  readonly maxBodyBytes: number;
}

/**
 * Applies defaults to the module's options and validates them, the engine's part by the engine's own
 * resolvers; never mutates its input. `source` says where they came from, for the messages.
 */
export function resolveModuleOptions(options: unknown, source: OptionsSource): ResolvedModuleOptions {
  const { where } = source;
  optionsObject(options, source.subject);
  const given = options as McpSubscriptionsOptions;
  const known = [...LISTEN_OPTION_KEYS, ...NEST_KEYS, ...source.extraKeys];
  const scope: ListenOptionsScope = {
    where,
    extraKeys: [...NEST_KEYS, ...source.extraKeys],
    elsewhere: withNearMisses(given, known, source.elsewhere),
  };
  // Unknown keys first, then the engine's checks. The module supplies the hub (built at start-up
  // from \`hub\`, when that is its options) and the hooks (tokens resolved at start-up; a guard run is
  // the default \`canRead\`): the engine checks the rest now, and those below.
  checkListenOptions<McpRequest>(
    { ...given, hub: undefined, canRead: undefined, handleSubscribeResource: undefined, canAccessTask: undefined },
    {
      ...scope,
      suppliedLater: ['hub', 'canRead', ...(given.canAccessTask === undefined ? [] : ['canAccessTask' as const])],
    },
  );
  const hub = resolveHub(given.hub, where);
  optionalFunction('principal', given.principal);
  const maxBodyBytes =
    given.maxBodyBytes === undefined ? DEFAULT_MAX_BODY_BYTES : positiveInteger('maxBodyBytes', given.maxBodyBytes);
  const hooks = Object.freeze({
    canRead: hookSource('canRead', given.canRead),
    handleSubscribeResource: hookSource('handleSubscribeResource', given.handleSubscribeResource),
    canAccessTask: hookSource('canAccessTask', given.canAccessTask),
  });
  const listen = Object.freeze(
    Object.fromEntries(Object.entries(given).filter(([key]) => ENGINE_KEYS.includes(key))),
  ) as EngineListenOptions;
  return Object.freeze({
    where,
    listen,
    hub,
    hooks,
    principal: given.principal ?? defaultPrincipal,
    maxBodyBytes,
  });
}

/** The hub given, or its options once validated (unknown keys named as `hub` of the entry point). */
function resolveHub(hub: unknown, where: string): SubscriptionHub | SubscriptionHubOptions {
  if (hub === undefined) return Object.freeze({});
  if (isHub(hub)) return hub;
  // A hub is known by its brand; an object with a hub's methods is no hub, nor a hub's options.
  if (typeof hub !== 'object' || hub === null || Array.isArray(hub) || typeof (hub as Hub).publish === 'function') {
    throw new OptionsError(
      ErrorCode.InvalidHub,
      `Expected \`hub\` of ${where} to be the options of the hub the module builds (e.g. \`{ maxSubscriptions: 500 }\`; ` +
        "leave `hub` out for the defaults), or a hub you made with `new SubscriptionHub()` imported from 'mcp-subscriptions', " +
        `got ${describeValue(hub)}`,
    );
  }
  removedOptions(hub, REMOVED_HUB_OPTIONS, `\`hub\` of ${where}`);
  knownKeys(hub, HUB_OPTION_KEYS, `\`hub\` of ${where}`);
  // Validated now; the hub itself is built at start-up (a bus is joined then, not here).
  resolveHubOptions(hub);
  return Object.freeze({ ...(hub as SubscriptionHubOptions) });
}

/**
 * Fails closed: with `capabilities.resourceSubscriptions` on, something must decide whether the caller
 * may read each URI. An authentication guard alone lets every probe through, so without `canRead`, a
 * guard in `guards` or global guards opted in to deciding reads, every URI would be admitted.
 */
export function checkReadDecided(options: ResolvedModuleOptions, route: ResolvedRouteOptions): void {
  if (!defineCapabilities(options.listen.capabilities).resourceSubscriptions) return;
  if (options.hooks.canRead.kind !== 'none' || route.guards.length > 0 || route.readGuards === 'route-and-global')
    return;
  throw new OptionsError(
    ErrorCode.NoReadCheck,
    `Expected \`canRead\` or read \`guards\` in ${options.where}, since \`capabilities.resourceSubscriptions\` is on: ` +
      'nothing decides whether the caller may read a URI, so every URI would be admitted. Name the guard that ' +
      "decides resources/read on your MCP route in `guards`, give `canRead`, or set `readGuards: 'route-and-global'` " +
      'if a global guard decides it',
  );
}
