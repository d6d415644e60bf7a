/**
 * `mcp-subscriptions`: `subscriptions/listen` (MCP 2026-07-28) for the host app's own MCP server.
 *
 * This entry is what users call: the hub that host services publish to, the capability declaration
 * that narrows acknowledgements and feeds `server/discover`, the in-memory bus, the errors (checked
 * by their `code`) and the diagnostics channels. Every option and type is documented in
 * lib/types.ts and re-exported here. The framework faces are entries of their own:
 * `mcp-subscriptions/express`, `mcp-subscriptions/fastify`, `mcp-subscriptions/nest`, and on the
 * web-standard fetch API `mcp-subscriptions/fetch` and `mcp-subscriptions/hono`.
 *
 * Deliberately NOT exported, and why:
 * - The listen engine (`createListenHandler`), the request parser, the SSE writer (`ListenStream`),
 *   and the HTTP plumbing the adapters share (body reading, `routeOf`, `serveNodeRequest`, the
 *   refusal status table): they live behind lib/internal.ts, which the package's `exports` do not
 *   publish. They change whenever the adapters need them to, and an app that mounts the middleware or
 *   the module never calls them. Writing your own adapter (raw `node:http`, Koa) is not a public
 *   API yet: ask for it in an issue, and it will get a documented, versioned entry of its own.
 * - The option validators and `resolve*Options()`: options are validated by the constructors and
 *   factories that take them, with a coded `OptionsError`.
 * - Wire constants (`_meta` keys, method names, JSON-RPC codes): the spec owns them.
 */
export { SubscriptionHub } from './subscription-hub.ts';
export { MemoryBus } from './bus.ts';
export { advertiseOffer, defineCapabilities, toServerCapabilities } from './capabilities.ts';
export type { CapabilitiesHolder } from './capabilities.ts';
export {
  CheckTimeoutError,
  ErrorCode,
  EventError,
  hasErrorCode,
  McpSubscriptionsError,
  OptionsError,
} from './errors.ts';
export type { ErrorCodeValue } from './errors.ts';
export { DiagnosticsChannel } from './diagnostics.ts';
export type {
  BusInterest,
  InterestLease,
  ResyncKeys,
  BusListener,
  EventContext,
  BusMember,
  CheckContext,
  CheckErrorMessage,
  CloseReason,
  DrainOptions,
  FilterSummary,
  Hub,
  HubStats,
  ListChangedKind,
  ListenHandlerOptions,
  Logger,
  McpChangeEvent,
  NodeAdapterOptions,
  NotificationFilter,
  PublishMessage,
  PublishReport,
  RequestId,
  ResolvedCapabilities,
  ResolvedHubOptions,
  ResolvedListenOptions,
  ResourceCheck,
  ServerCapabilitiesFragment,
  StreamCloseMessage,
  StreamOpenMessage,
  SubscriptionBus,
  SubscriptionCapabilities,
  SubscriptionEvent,
  SubscriptionEventKind,
  SubscriptionHubOptions,
  TaskState,
  UncheckedListenMessage,
} from './types.ts';
