/**
 * Validation of the module's own options, in the engine's manner: a mistake throws an `OptionsError`
 * (`code: 'ERR_MCP_SUBSCRIPTIONS_INVALID_OPTION'`) naming the field. The engine validates the rest
 * (capabilities, bounds, durations, the hub's options) with its own messages.
 */
import {
  describeValue,
  ErrorCode,
  optionalFunction,
  OptionsError,
  optionsObject,
  positiveInteger,
  type ResourceCheck,
} from '../../lib/internal.ts';
import { DEFAULT_MCP_PATH } from './mcp-subscriptions.constants.ts';
import type {
  McpHook,
  McpRequest,
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsOptions,
  McpSubscriptionsRouteOptions,
} from './mcp-subscriptions.interfaces.ts';

/** Route options after defaults and validation. */
export interface ResolvedRouteOptions {
  readonly path: string;
  readonly guards: NonNullable<McpSubscriptionsRouteOptions['guards']>;
  readonly isGlobal: boolean;
}

/** Validates what shapes the module (path, guards, isGlobal); applies defaults. */
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
  const isGlobal = options.isGlobal ?? true;
  if (typeof isGlobal !== 'boolean') {
    throw new OptionsError(
      ErrorCode.NotBoolean,
      `Expected \`isGlobal\` to be a boolean, got ${describeValue(isGlobal)}`,
    );
  }
  return Object.freeze({ path, guards: Object.freeze([...(guards as ResolvedRouteOptions['guards'])]), isGlobal });
}

/** Checks that exactly one way to provide the options is given to `forRootAsync()`. */
export function checkAsyncOptions(options: McpSubscriptionsModuleAsyncOptions): void {
  const given = (['useFactory', 'useClass', 'useExisting'] as const).filter((key) => options?.[key] !== undefined);
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
}

/** A hook as given: nothing, a function, or the token of a provider to resolve at module init. */
export type HookSource =
  | { readonly kind: 'none' }
  | { readonly kind: 'function'; readonly check: ResourceCheck<McpRequest> }
  | { readonly kind: 'provider'; readonly token: NonNullable<McpHook<unknown>> };

/**
 * Tells a function hook from a provider token. A class whose prototype has the hook's method is a
 * provider's token; any other function is the hook itself.
 */
export function hookSource(name: 'canRead' | 'handleSubscribeResource' | 'canAccessTask', value: unknown): HookSource {
  if (value === undefined) return { kind: 'none' };
  if (typeof value === 'string' || typeof value === 'symbol') return { kind: 'provider', token: value };
  if (typeof value === 'function') {
    const prototype = (value as { prototype?: Record<string, unknown> }).prototype;
    if (typeof prototype?.[name] === 'function') return { kind: 'provider', token: value as McpHook<unknown> };
    return { kind: 'function', check: value as ResourceCheck<McpRequest> };
  }
  throw new OptionsError(
    ErrorCode.InvalidHook,
    `Expected \`${name}\` to be a function or the injection token of a provider with a \`${name}()\` method, got ${describeValue(value)}`,
  );
}

/** Validates the module's own listen options (the engine validates the rest when the handler is built). */
export function checkModuleOptions(options: McpSubscriptionsOptions): void {
  optionsObject(options);
  optionalFunction('principal', options.principal);
  if (options.maxBodyBytes !== undefined) positiveInteger('maxBodyBytes', options.maxBodyBytes);
  const hub = options.hub as unknown;
  if (hub !== undefined && (typeof hub !== 'object' || hub === null)) {
    throw new OptionsError(
      ErrorCode.InvalidHub,
      `Expected \`hub\` to be a SubscriptionHub or its options, got ${describeValue(hub)}`,
    );
  }
}
