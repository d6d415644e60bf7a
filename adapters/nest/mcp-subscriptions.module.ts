/**
 * `McpSubscriptionsModule`: `subscriptions/listen` on a Nest app's MCP path, behind the app's guards.
 * Defined with Nest's `ConfigurableModuleBuilder` (mcp-subscriptions.module-definition.ts); this class
 * adds the validation of its options and the providers that carry their resolved form.
 */
import { Inject, Module, type DynamicModule, type NestModule, type Provider } from '@nestjs/common';
import { ConfigurableModuleClass } from './mcp-subscriptions.module-definition.ts';
import type {
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsModuleOptions,
} from './mcp-subscriptions.interfaces.ts';
import {
  checkAsyncOptions,
  checkReadDecided,
  factorySource,
  FOR_ROOT_SOURCE,
  resolveModuleOptions,
  resolveRouteOptions,
} from './mcp-subscriptions.options.ts';
import { resolvedOptionsFactory, resolvedOptionsValue } from './mcp-subscriptions.providers.ts';
import { McpSubscriptionsService } from './mcp-subscriptions.service.ts';

function withProviders(definition: DynamicModule, providers: Provider[]): DynamicModule {
  return { ...definition, providers: [...(definition.providers ?? []), ...providers] };
}

/**
 * Adds `subscriptions/listen` (MCP 2026-07-28) to a Nest app on the Express or the Fastify platform: a
 * controller route on your MCP path, in front of whatever serves the rest of MCP there, behind your
 * global guards and the `guards` you name. Each requested URI is admitted only if the `guards` you name let a
 * `resources/read` of it by the same caller through (the global guards too with `readGuards:
 * 'route-and-global'`), or your `canRead` does; with resource subscriptions on and neither, the module
 * refuses to start. The `SubscriptionHub` it provides is injectable by its class in every module
 * (`isGlobal`), and every open stream ends with its terminal result when the app shuts down.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [
 *     McpSubscriptionsModule.forRoot({
 *       capabilities: { toolsListChanged: true, resourceSubscriptions: true },
 *       guards: [NoteReadGuard], // the guards of your MCP route; APP_GUARDs apply anyway
 *     }),
 *   ],
 *   controllers: [McpController], // serves the rest of MCP on POST /mcp (the SDK's handler)
 * })
 * export class AppModule {}
 *
 * @Injectable()
 * export class NotesService {
 *   constructor(@Inject(SubscriptionHub) private readonly hub: SubscriptionHub) {}
 *   save(note: Note) {
 *     this.hub.resourceUpdated(note.uri);
 *   }
 * }
 * ```
 */
@Module({})
export class McpSubscriptionsModule extends ConfigurableModuleClass implements NestModule {
  constructor(@Inject(McpSubscriptionsService) private readonly subscriptions: McpSubscriptionsService) {
    super();
  }

  /**
   * Nest configures modules before it registers any route: the one moment the listen route's place in
   * front of your MCP route can be prepared on Fastify, and a platform it cannot be placed on refused.
   */
  configure(): void {
    this.subscriptions.prepareRoute();
  }

  /**
   * The module with options known up front. They are validated here: a mistake (an unknown key, a
   * negative bound, a hook class without its method, resource subscriptions with nothing that decides
   * reads) throws an `OptionsError` from this call.
   */
  static override forRoot(options: McpSubscriptionsModuleOptions): DynamicModule {
    const resolved = resolveModuleOptions(options, FOR_ROOT_SOURCE);
    checkReadDecided(resolved, resolveRouteOptions(options));
    return withProviders(super.forRoot(options), [resolvedOptionsValue(resolved)]);
  }

  /**
   * The module with options from a factory, a class or an existing provider (a config service, say).
   * `path`, `guards`, `readGuards` and `isGlobal` shape the module, so they are given here, not by the factory. The
   * options of this call are validated here; the options the factory returns, when the application
   * starts (it fails to start on a mistake).
   *
   * @example
   * ```ts
   * McpSubscriptionsModule.forRootAsync({
   *   guards: [NoteReadGuard],
   *   imports: [ConfigModule],
   *   inject: [ConfigService],
   *   useFactory: (config: ConfigService) => ({
   *     capabilities: { resourceSubscriptions: true },
   *     hub: { maxSubscriptions: config.get('MAX_SUBSCRIPTIONS') },
   *   }),
   * });
   * ```
   */
  static override forRootAsync(options: McpSubscriptionsModuleAsyncOptions): DynamicModule {
    checkAsyncOptions(options);
    // The builder types `useExisting` as a class; it only injects it, so any token (a string, a symbol) works.
    const definition = super.forRootAsync(options as Parameters<typeof ConfigurableModuleClass.forRootAsync>[0]);
    return withProviders(definition, [
      resolvedOptionsFactory(factorySource(options), resolveRouteOptions(options)),
      ...(options.extraProviders ?? []),
    ]);
  }
}
