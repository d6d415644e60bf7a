/**
 * The module's definition, made by Nest's `ConfigurableModuleBuilder` (the way `@nestjs/cache-manager`
 * defines its own): the static `forRoot(options)` and `forRootAsync({ useFactory | useClass |
 * useExisting, inject, imports, provideInjectionTokensFrom })`, the options provided under
 * `MCP_SUBSCRIPTIONS_OPTIONS`, and the extras (`path`, `guards`, `readGuards`, `isGlobal`) that shape the module:
 * its listen route, the guards on it and on the read context, and its scope.
 */
import { ConfigurableModuleBuilder, type DynamicModule } from '@nestjs/common';
import { SubscriptionHub } from '../../lib/internal.ts';
import {
  DEFAULT_MCP_PATH,
  MCP_SUBSCRIPTIONS_OPTIONS,
  MCP_SUBSCRIPTIONS_ROUTE_OPTIONS,
  OPTIONS_FACTORY_METHOD,
} from './mcp-subscriptions.constants.ts';
import { createListenController, createReadContext } from './mcp-subscriptions.controller.ts';
import type { McpSubscriptionsOptions, McpSubscriptionsRouteOptions } from './mcp-subscriptions.interfaces.ts';
import { resolveRouteOptions } from './mcp-subscriptions.options.ts';
import { hubProvider, readContextProviders } from './mcp-subscriptions.providers.ts';
import { McpSubscriptionsService } from './mcp-subscriptions.service.ts';

/**
 * The module a `forRoot()` or `forRootAsync()` call defines: the builder's definition (the options
 * provider, the async source's providers and `imports`) plus what the extras shape. The route and the
 * read context are classes made per call, since their path and guards are decorator arguments.
 */
function shapeModule(definition: DynamicModule, extras: McpSubscriptionsRouteOptions): DynamicModule {
  const route = resolveRouteOptions(extras);
  return {
    ...definition,
    global: route.isGlobal,
    controllers: [createListenController(route.path, route.guards)],
    providers: [
      ...(definition.providers ?? []),
      hubProvider,
      { provide: MCP_SUBSCRIPTIONS_ROUTE_OPTIONS, useValue: route },
      ...readContextProviders(createReadContext(route.guards)),
      McpSubscriptionsService,
    ],
    exports: [SubscriptionHub, McpSubscriptionsService],
  };
}

export const { ConfigurableModuleClass } = new ConfigurableModuleBuilder<McpSubscriptionsOptions>({
  optionsInjectionToken: MCP_SUBSCRIPTIONS_OPTIONS,
})
  .setClassMethodName('forRoot')
  .setFactoryMethodName(OPTIONS_FACTORY_METHOD)
  .setExtras<McpSubscriptionsRouteOptions>(
    { path: DEFAULT_MCP_PATH, guards: [], readGuards: 'route', isGlobal: true },
    shapeModule,
  )
  .build();
