/**
 * mcp-subscriptions: the framework-free engine. Adapters (`mcp-subscriptions/express`, …) import
 * from here and nowhere else in `lib/`.
 */
export { SubscriptionHub, resolveHubOptions } from './subscription-hub.ts';
export type {
  HubStats,
  OpenInit,
  PublishReport,
  Reservation,
  ResolvedHubOptions,
  SubscriptionHubOptions,
} from './subscription-hub.ts';
export { createListenHandler, isJsonContentType, resolveListenOptions, routeOf, writeProtocolError } from './listen.ts';
export type {
  CheckContext,
  ListenHandler,
  ListenHandlerOptions,
  ListenInput,
  ResolvedListenOptions,
  ResourceCheck,
} from './listen.ts';
export { ListenStream } from './listen-stream.ts';
export type { CloseReason, DeliverOutcome, StreamResponse } from './listen-stream.ts';
export { MemoryBus } from './bus.ts';
export type { BusMember, SubscriptionBus } from './bus.ts';
export { defineCapabilities, toServerCapabilities } from './capabilities.ts';
export type { ResolvedCapabilities, ServerCapabilitiesFragment, SubscriptionCapabilities } from './capabilities.ts';
export {
  describeValue,
  ErrorCode,
  EventError,
  hasErrorCode,
  httpStatusFor,
  McpSubscriptionsError,
  OptionsError,
  ProtocolError,
  RpcErrorCode,
  SUBSCRIPTION_LIMIT_MESSAGE,
} from './errors.ts';
export {
  CLIENT_CAPABILITIES_META_KEY,
  NOTIFICATION_METHODS,
  PROTOCOL_VERSION_META_KEY,
  SERVER_INFO_META_KEY,
  SUBSCRIPTION_ID_META_KEY,
  SUPPORTED_PROTOCOL_VERSIONS,
  TASKS_EXTENSION,
} from './events.ts';
export type {
  ListChangedKind,
  McpChangeEvent,
  NotificationFilter,
  RequestId,
  SubscriptionEvent,
  SubscriptionEventKind,
  TaskState,
} from './events.ts';
export { CheckTimeoutError } from './authorize.ts';
export { durationMs, MAX_TIMER_MS, optionalFunction, positiveInteger } from './options.ts';
export { consoleLogger, DiagnosticsChannel } from './diagnostics.ts';
export type { Logger } from './diagnostics.ts';
export { CANCELLED_METHOD, LISTEN_METHOD, isAbsoluteUri, parseJsonBody, parseListenRequest } from './protocol.ts';
export type { HeaderBag, ListenRequest, ParseOptions } from './protocol.ts';
export { OVERFLOW_POLICIES } from './stream-queue.ts';
export type { OverflowPolicy } from './stream-queue.ts';
export { SSE_HEADERS, KEEPALIVE_FRAME } from './sse.ts';
export {
  bodyTooLarge,
  bodyWasParsed,
  DEFAULT_MAX_BODY_BYTES,
  defaultPrincipal,
  leaveParsedBody,
  readRequestBody,
  serveNodeRequest,
} from './node-request.ts';
export type { NodeRequest, NodeServeOptions } from './node-request.ts';
