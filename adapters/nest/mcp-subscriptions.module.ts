/**
 * `McpSubscriptionsModule`: `subscriptions/listen` on a Nest app's MCP path, behind the app's guards.
 */
import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { SubscriptionHub } from '../../lib/internal.ts';
import { MCP_SUBSCRIPTIONS_OPTIONS } from './mcp-subscriptions.constants.ts';
import { createListenController, createReadContext } from './mcp-subscriptions.controller.ts';
import type {
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsModuleOptions,
} from './mcp-subscriptions.interfaces.ts';
import { checkAsyncOptions, resolveRouteOptions, type ResolvedRouteOptions } from './mcp-subscriptions.options.ts';
import { asyncOptionsProviders, hubProvider, readContextProviders } from './mcp-subscriptions.providers.ts';
import { McpSubscriptionsService } from './mcp-subscriptions.service.ts';

/**
 * Adds `subscriptions/listen` (MCP 2026-07-28) to a Nest app on the Express platform: a controller
 * route on your MCP path, in front of whatever serves the rest of MCP there, behind your global guards
 * and the `guards` you name. Each requested URI is admitted only if those same guards let a
 * `resources/read` of it by the same caller through (or your `canRead`). The `SubscriptionHub` it
 * provides is injectable by its class in every module (`isGlobal`), and every open stream ends with its
 * terminal result when the app shuts down.
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
export class McpSubscriptionsModule {
  /** The module with options known up front. Options are validated when the app starts. */
  static forRoot(options: McpSubscriptionsModuleOptions): DynamicModule {
    const route = resolveRouteOptions(options);
    const { path: _path, guards: _guards, isGlobal: _isGlobal, ...listen } = options;
    return McpSubscriptionsModule.define(route, [{ provide: MCP_SUBSCRIPTIONS_OPTIONS, useValue: listen }], []);
  }

  /**
   * The module with options from a factory, a class or an existing provider (a config service, say).
   * `path`, `guards` and `isGlobal` shape the module, so they are given here, not by the factory.
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
  static forRootAsync(options: McpSubscriptionsModuleAsyncOptions): DynamicModule {
    const route = resolveRouteOptions(options);
    checkAsyncOptions(options);
    return McpSubscriptionsModule.define(
      route,
      [...asyncOptionsProviders(options), ...(options.extraProviders ?? [])],
      options.imports ?? [],
    );
  }

  private static define(
    route: ResolvedRouteOptions,
    optionProviders: Provider[],
    imports: NonNullable<DynamicModule['imports']>,
  ): DynamicModule {
    return {
      module: McpSubscriptionsModule,
      global: route.isGlobal,
      imports,
      controllers: [createListenController(route.path, route.guards)],
      providers: [
        ...optionProviders,
        hubProvider,
        ...readContextProviders(createReadContext(route.guards)),
        McpSubscriptionsService,
      ],
      exports: [SubscriptionHub, McpSubscriptionsService],
    };
  }
}
