/**
 * The providers of `McpSubscriptionsModule` besides the options themselves (which the module builder
 * provides): the options resolved, the hub built from them, and the context the host's guards decide
 * URIs in.
 */
import type { Provider, Type } from '@nestjs/common';
import { isHub, SubscriptionHub } from '../../lib/internal.ts';
import {
  MCP_SUBSCRIPTIONS_OPTIONS,
  MCP_SUBSCRIPTIONS_READ_CONTEXT,
  MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS,
} from './mcp-subscriptions.constants.ts';
import type { McpReadContext } from './mcp-subscriptions.interfaces.ts';
import {
  checkReadDecided,
  resolveModuleOptions,
  type OptionsSource,
  type ResolvedModuleOptions,
  type ResolvedRouteOptions,
} from './mcp-subscriptions.options.ts';
import { nestLogger } from './nest-logger.ts';

/** The options of `forRoot()`, resolved when it was called. */
export function resolvedOptionsValue(resolved: ResolvedModuleOptions): Provider {
  return { provide: MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS, useValue: resolved };
}

/**
 * The options a `forRootAsync()` factory returned, resolved (and so validated) as the application
 * starts, with the route options of the `forRootAsync()` call (which say whether guards decide reads).
 */
export function resolvedOptionsFactory(source: OptionsSource, route: ResolvedRouteOptions): Provider {
  return {
    provide: MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS,
    useFactory: (options: unknown) => {
      const resolved = resolveModuleOptions(options, source);
      checkReadDecided(resolved, route);
      return resolved;
    },
    inject: [MCP_SUBSCRIPTIONS_OPTIONS],
  };
}

/**
 * The hub: the one given in the options, or one built from its options, logging through Nest's
 * `Logger` unless a `logger` is given.
 */
export function createHub({ hub }: ResolvedModuleOptions): SubscriptionHub {
  if (isHub(hub)) return hub;
  return new SubscriptionHub({ logger: nestLogger(), ...hub });
}

/** `SubscriptionHub`, injectable by its class. */
export const hubProvider: Provider = {
  provide: SubscriptionHub,
  useFactory: createHub,
  inject: [MCP_SUBSCRIPTIONS_RESOLVED_OPTIONS],
};

/** The read context class, also under its token (the service injects it by token). */
export function readContextProviders(readContext: Type<McpReadContext>): Provider[] {
  return [readContext, { provide: MCP_SUBSCRIPTIONS_READ_CONTEXT, useExisting: readContext }];
}
