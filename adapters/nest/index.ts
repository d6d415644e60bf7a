/**
 * `mcp-subscriptions/nest`: the NestJS module. `subscriptions/listen` on your MCP path behind your
 * own guards, per-URI checks decided by the guard you already wrote for `resources/read`, and the
 * `SubscriptionHub` injectable by its class. Nest 11 and 12, Express platform.
 */
export { McpSubscriptionsModule } from './mcp-subscriptions.module.ts';
export { McpSubscriptionsService } from './mcp-subscriptions.service.ts';
export {
  DEFAULT_MCP_PATH,
  MCP_SUBSCRIPTIONS_OPTIONS,
  MCP_SUBSCRIPTIONS_ROUTE,
  RESOURCES_READ_METHOD,
} from './mcp-subscriptions.constants.ts';
export type {
  McpCheckContext,
  McpHook,
  McpHookProvider,
  McpReadContext,
  McpReadGuards,
  McpRequest,
  McpResourceReadCheck,
  McpSubscribeResourceHandler,
  McpSubscriptionsModuleAsyncOptions,
  McpSubscriptionsModuleOptions,
  McpSubscriptionsOptions,
  McpSubscriptionsOptionsFactory,
  McpSubscriptionsRouteOptions,
  McpTaskAccessCheck,
} from './mcp-subscriptions.interfaces.ts';
export { fromHub, publishTo } from './hub-events.ts';
// The hub is the engine's class: re-exported so one import names the module and the token to inject.
export { defaultPrincipal, SubscriptionHub } from '../../lib/internal.ts';
