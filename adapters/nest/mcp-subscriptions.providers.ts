/**
 * The providers of `McpSubscriptionsModule`: the options (given, or from an async source), the hub
 * built from them, and the context the host's guards decide URIs in.
 */
import type { Provider, Type } from '@nestjs/common';
import { SubscriptionHub } from '../../lib/internal.ts';
import { MCP_SUBSCRIPTIONS_OPTIONS, MCP_SUBSCRIPTIONS_READ_CONTEXT } from './mcp-subscriptions.constants.ts';
import type {
  McpReadContext,
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsOptions,
  McpSubscriptionsOptionsFactory,
} from './mcp-subscriptions.interfaces.ts';
import { checkModuleOptions } from './mcp-subscriptions.options.ts';
import { nestLogger } from './nest-logger.ts';

function isHub(value: unknown): value is SubscriptionHub {
  // By shape, as the engine checks it: a hub from another copy of the package is still a hub.
  return typeof value === 'object' && value !== null && typeof (value as SubscriptionHub).reserve === 'function';
}

/**
 * The hub: the one given in the options, or one built from its options (validated by the engine),
 * logging through Nest's `Logger` unless a `logger` is given.
 */
export function createHub(options: McpSubscriptionsOptions): SubscriptionHub {
  checkModuleOptions(options);
  const { hub } = options;
  if (isHub(hub)) return hub;
  return new SubscriptionHub({ logger: nestLogger(), ...hub });
}

/** `SubscriptionHub`, injectable by its class. */
export const hubProvider: Provider = {
  provide: SubscriptionHub,
  useFactory: createHub,
  inject: [MCP_SUBSCRIPTIONS_OPTIONS],
};

/** The read context class, also under its token (the service injects it by token). */
export function readContextProviders(readContext: Type<McpReadContext>): Provider[] {
  return [readContext, { provide: MCP_SUBSCRIPTIONS_READ_CONTEXT, useExisting: readContext }];
}

/** The options provider(s) of `forRootAsync()`. */
export function asyncOptionsProviders(options: McpSubscriptionsModuleAsyncOptions): Provider[] {
  if (options.useFactory !== undefined) {
    return [{ provide: MCP_SUBSCRIPTIONS_OPTIONS, useFactory: options.useFactory, inject: options.inject ?? [] }];
  }
  const factory = (options.useClass ?? options.useExisting) as Type<McpSubscriptionsOptionsFactory>;
  const fromFactory: Provider = {
    provide: MCP_SUBSCRIPTIONS_OPTIONS,
    useFactory: (source: McpSubscriptionsOptionsFactory) => source.createMcpSubscriptionsOptions(),
    inject: [factory],
  };
  return options.useClass !== undefined ? [fromFactory, options.useClass] : [fromFactory];
}
