/**
 * The adapters' door: what `mcp-subscriptions/express`, `/nest`, `/fastify`, `/fetch` and `/hono` share and users
 * must not depend on. The package's `exports` do not publish this file, so nothing here is a public
 * API: it changes whenever an adapter needs it to. Adapters import lib/ through this file and
 * lib/index.ts only (ESLint enforces it); the client, through lib/core.ts, re-exported here.
 */
export * from './index.ts';
export * from './core.ts';
export { checkListenOptions, createListenHandler, LISTEN_OPTION_KEYS, resolveListenOptions } from './listen.ts';
export type { CheckedListenOptions, ListenOptionsScope } from './listen.ts';
export { HUB_OPTION_KEYS, hubEngine, isHub, REMOVED_HUB_OPTIONS, resolveHubOptions } from './subscription-hub.ts';
export type { HubEngine, OpenInit, Reservation } from './subscription-hub.ts';
export {
  bodyInput,
  bodyTooLarge,
  closeUnreadAfterAnswer,
  bodyWasParsed,
  DEFAULT_MAX_BODY_BYTES,
  defaultPrincipal,
  dispatchRequest,
  headerBagOf,
  isJsonContentType,
  leaveParsedBody,
  negotiate,
  NODE_ADAPTER_OPTION_KEYS,
  readFetchBody,
  readRequestBody,
  refusalHeaders,
  refusalStatus,
  REFUSAL_STATUS,
  routeOf,
  serveFetchRequest,
  serveNodeRequest,
  takeOverReply,
  writeProtocolError,
} from './http.ts';
export type {
  DispatchInput,
  DispatchOptions,
  FetchServed,
  FetchServeOptions,
  ListenHandler,
  ListenInput,
  NodeRequest,
  NodeServeOptions,
  WrappedReply,
} from './http.ts';
export { DRAINING_MESSAGE, ProtocolError, SUBSCRIPTION_LIMIT_MESSAGE } from './errors.ts';
export type { RefusalReason } from './errors.ts';
export { removedOptions } from './validate.ts';
export { consoleLogger, failureSummary } from './diagnostics.ts';
export { isAbsoluteUri, parseJsonBody, parseListenRequest, validateEvent } from './protocol.ts';
export type { HeaderBag, ListenRequest, ParseOptions } from './protocol.ts';
export { ListenStream } from './listen-stream.ts';
export type { DeliverOutcome, StreamResponse } from './listen-stream.ts';
export { KEEPALIVE_FRAME, SSE_HEADERS } from './sse.ts';
export { CLOSED_BEFORE_HEAD_STATUS, WEB_HIGH_WATER_MARK, WebStreamResponse } from './web-response.ts';
export { BusMembers } from './bus-members.ts';
export { InterestReconciler } from './interest.ts';
export type { GapKeys, InterestHooks, InterestKeyType, InterestOptions, InterestTransport } from './interest.ts';
export { DEFAULT_BACKLOG_KEYS, UnsentBacklog } from './backlog.ts';
export type { BacklogContents } from './backlog.ts';
export {
  LEGACY_COPY_MARK,
  LEGACY_WIRE_VERSION,
  MAX_MESSAGE_BYTES,
  MAX_NODE_ID_LENGTH,
  MAX_REF_LENGTH,
  MAX_TRACESTATE_LENGTH,
  tooLarge,
  Wire,
  WIRE_VERSION,
} from './wire.ts';
export type { Decoded, DropReason, WireOptions } from './wire.ts';
