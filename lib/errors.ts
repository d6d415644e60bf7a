/**
 * Every error this package throws, and the codes that identify them. A leaf module. Check errors by
 * their `code`, never with `instanceof`: two copies of the package in one app still agree on a
 * string. docs/error-codes.md lists every code with its cause and its fix.
 */
import type { RefusalReason } from './types.ts';

/** JSON-RPC error codes used by listen (spec §6). */
export const RpcErrorCode = Object.freeze({
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
});

/** Stable `code` strings of this package's errors (docs/error-codes.md). */
export const ErrorCode = Object.freeze({
  // A programmer's mistake in options, thrown at construction (OptionsError): one code per check.
  /** The options (or a nested options object such as `capabilities`) are not an object. */
  OptionsNotObject: 'ERR_MCP_SUBSCRIPTIONS_OPTIONS_NOT_OBJECT',
  /** An option key that the entry point does not know (a typo, or an option of another entry point). */
  UnknownOption: 'ERR_MCP_SUBSCRIPTIONS_UNKNOWN_OPTION',
  /** An option that was removed (the hub's `maxBuffer` and `overflow`); the message says what replaced it. */
  RemovedOption: 'ERR_MCP_SUBSCRIPTIONS_REMOVED_OPTION',
  /** A required option is missing (`hub`, `capabilities`, or the check an offered capability needs). */
  MissingOption: 'ERR_MCP_SUBSCRIPTIONS_MISSING_OPTION',
  /** A count or bound that must be a positive safe integer is not. */
  NotPositiveInteger: 'ERR_MCP_SUBSCRIPTIONS_NOT_POSITIVE_INTEGER',
  /** A duration is longer than Node's timers can wait (2147483647 ms). */
  DurationTooLong: 'ERR_MCP_SUBSCRIPTIONS_DURATION_TOO_LONG',
  /** An option that must be a boolean is not. */
  NotBoolean: 'ERR_MCP_SUBSCRIPTIONS_NOT_BOOLEAN',
  /** An option that must be a function (a check, a hook, `principal`) is not. */
  NotFunction: 'ERR_MCP_SUBSCRIPTIONS_NOT_FUNCTION',
  /** An option that takes one of a few values (the client's `overflow`, Nest's `readGuards`) has another. */
  NotOneOf: 'ERR_MCP_SUBSCRIPTIONS_NOT_ONE_OF',
  /** `hub` is not a `SubscriptionHub` (or, in Nest, its options). */
  InvalidHub: 'ERR_MCP_SUBSCRIPTIONS_INVALID_HUB',
  /** `bus` does not implement `SubscriptionBus` (`join({ event, cancel })`). */
  InvalidBus: 'ERR_MCP_SUBSCRIPTIONS_INVALID_BUS',
  /** `logger` lacks `warn` or `error`. */
  InvalidLogger: 'ERR_MCP_SUBSCRIPTIONS_INVALID_LOGGER',
  /** `protocolVersions` is not a non-empty array of strings. */
  InvalidProtocolVersions: 'ERR_MCP_SUBSCRIPTIONS_INVALID_PROTOCOL_VERSIONS',
  /** `serverInfo` is not an object. */
  InvalidServerInfo: 'ERR_MCP_SUBSCRIPTIONS_INVALID_SERVER_INFO',
  /** `advertiseOffer()` was handed something that is not an MCP server (no `getCapabilities()`). */
  InvalidServer: 'ERR_MCP_SUBSCRIPTIONS_INVALID_SERVER',
  /** Nest: `path` is not a non-empty string; Fastify: not a route URL starting with `/`. */
  InvalidPath: 'ERR_MCP_SUBSCRIPTIONS_INVALID_PATH',
  /** Nest: an entry of `guards` is neither a guard class nor an object with `canActivate()`. */
  InvalidGuard: 'ERR_MCP_SUBSCRIPTIONS_INVALID_GUARD',
  /** Nest: `forRootAsync()` got none, or more than one, of `useFactory`, `useClass`, `useExisting`. */
  InvalidAsyncOptions: 'ERR_MCP_SUBSCRIPTIONS_INVALID_ASYNC_OPTIONS',
  /** Nest: a hook is neither a function nor the token of a provider with the hook's method. */
  InvalidHook: 'ERR_MCP_SUBSCRIPTIONS_INVALID_HOOK',
  /** Nest: `capabilities.resourceSubscriptions` is on, with no `canRead` and no guard that decides reads. */
  NoReadCheck: 'ERR_MCP_SUBSCRIPTIONS_NO_READ_CHECK',
  /**
   * Nest: the listen route could not be put in front of the host's MCP route (not found, or a platform
   * other than Express and Fastify). Fastify: no MCP route for the plugin to serve listen in front of, or
   * one registered before the plugin.
   */
  RouteNotPlaced: 'ERR_MCP_SUBSCRIPTIONS_ROUTE_NOT_PLACED',
  /** Fastify: the plugin was registered twice in one context (it decorates the instance once). */
  AlreadyRegistered: 'ERR_MCP_SUBSCRIPTIONS_ALREADY_REGISTERED',
  /**
   * Redis: `publisher` or `subscriber` is neither an ioredis client nor a node-redis (v4+) client (single
   * node or cluster), or one is a cluster client and the other not, or they are clusters of two libraries.
   */
  InvalidRedisClient: 'ERR_MCP_SUBSCRIPTIONS_INVALID_REDIS_CLIENT',
  /** Redis: `subscriber` is the very connection given as `publisher`; a subscribed connection cannot publish. */
  SameRedisConnection: 'ERR_MCP_SUBSCRIPTIONS_SAME_REDIS_CONNECTION',
  /** Redis: `url` is not a `redis://` or `rediss://` URL. */
  InvalidRedisUrl: 'ERR_MCP_SUBSCRIPTIONS_INVALID_REDIS_URL',
  /**
   * Redis and PostgreSQL: `channelPrefix` is not a non-empty string; PostgreSQL: or it holds a NUL, or it
   * is too long for the bus's channel names to fit PostgreSQL's 63-byte identifiers.
   */
  InvalidChannelPrefix: 'ERR_MCP_SUBSCRIPTIONS_INVALID_CHANNEL_PREFIX',
  /** Redis: `nodeId` is not a non-empty string of at most 200 characters. */
  InvalidNodeId: 'ERR_MCP_SUBSCRIPTIONS_INVALID_NODE_ID',
  /** Redis: `routing` is not `'interest'`, `'broadcast'` or `{ buckets: n }` with an integer n from 1 to 65536. */
  InvalidRouting: 'ERR_MCP_SUBSCRIPTIONS_INVALID_ROUTING',
  /** Redis: `cluster` is not a non-empty array of seed nodes (`host:port` or `redis://host:port`), at most 100. */
  InvalidClusterNodes: 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES',
  /**
   * Options that exclude each other were given together (`url`, `cluster` and `publisher`/`subscriber`:
   * one of them; `client` without `url` or `cluster`).
   */
  ConflictingOptions: 'ERR_MCP_SUBSCRIPTIONS_CONFLICTING_OPTIONS',
  /** PostgreSQL: `url` is not a `postgres://` or `postgresql://` URL. */
  InvalidPostgresUrl: 'ERR_MCP_SUBSCRIPTIONS_INVALID_POSTGRES_URL',
  /**
   * PostgreSQL: `pool` is not a node-postgres `Pool` (`query`, `connect`), or `listener` is neither a
   * factory of new clients nor a client configuration, or the pool cannot make the listening client
   * (no `Client` and `options`) and no `listener` was given.
   */
  InvalidPostgresClient: 'ERR_MCP_SUBSCRIPTIONS_INVALID_POSTGRES_CLIENT',
  /** PostgreSQL: `spillTable` is neither `false` nor a table name (`name` or `schema.name`, each a plain identifier of at most 63 bytes). */
  InvalidSpillTable: 'ERR_MCP_SUBSCRIPTIONS_INVALID_SPILL_TABLE',
  /** Client: the URL `listen()` was given is not an absolute `http:` or `https:` URL. */
  InvalidUrl: 'ERR_MCP_SUBSCRIPTIONS_INVALID_URL',
  /** Client: the filter `listen()` was given is not an object, or one of its fields has the wrong type. */
  InvalidFilter: 'ERR_MCP_SUBSCRIPTIONS_INVALID_FILTER',
  /** Client: `headers` is not an object of strings, or sets a header that `listen()` owns (`Mcp-Method`, …). */
  InvalidHeaders: 'ERR_MCP_SUBSCRIPTIONS_INVALID_HEADERS',
  /** Client: `id` is neither a string nor a finite number. */
  InvalidRequestId: 'ERR_MCP_SUBSCRIPTIONS_INVALID_REQUEST_ID',
  /** Client: `signal` is not an `AbortSignal`. */
  InvalidSignal: 'ERR_MCP_SUBSCRIPTIONS_INVALID_SIGNAL',
  /**
   * Redis: the url form found no client library (`ioredis` or `redis`, or the one `client` names). Reported
   * through the logger, not thrown: the library is loaded asynchronously after construction.
   */
  RedisClientMissing: 'ERR_MCP_SUBSCRIPTIONS_REDIS_CLIENT_MISSING',
  /**
   * PostgreSQL: the url form could not load `pg` (node-postgres). Reported through the logger, not thrown:
   * the library is loaded asynchronously after construction.
   */
  PostgresClientMissing: 'ERR_MCP_SUBSCRIPTIONS_POSTGRES_CLIENT_MISSING',

  // Runtime errors.
  /** A host published an event that is not valid (a relative URI, an unknown kind): `EventError`. */
  InvalidEvent: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT',
  /** A client's listen request was refused before the stream opened: `ProtocolError`. */
  Protocol: 'ERR_MCP_SUBSCRIPTIONS_PROTOCOL',
  /** A host check took longer than `authorizeTimeoutMs`; its item was left out: `CheckTimeoutError`. */
  CheckTimeout: 'ERR_MCP_SUBSCRIPTIONS_CHECK_TIMEOUT',
  /**
   * A listen's checks together took longer than `authorizeDeadlineMs`; the items not decided by then
   * were left out: `AuthorizeDeadlineError`, the reason of the checks' aborted signals.
   */
  AuthorizeDeadline: 'ERR_MCP_SUBSCRIPTIONS_AUTHORIZE_DEADLINE',
  /** An engine invariant was broken (a reservation opened twice): a bug in an adapter. */
  Internal: 'ERR_MCP_SUBSCRIPTIONS_INTERNAL',
  /**
   * A `subscriptions/listen` reached the MCP SDK's own listen handler, past this library (the hub is
   * the SDK's `bus`): thrown by `hub.subscribe()` to refuse it, since its URIs were never checked.
   */
  UncheckedListen: 'ERR_MCP_SUBSCRIPTIONS_UNCHECKED_LISTEN',

  // Runtime errors of the client (`mcp-subscriptions/client`): `ListenError` and `WaitForError`.
  /** Client: the server answered the listen request with an error (an HTTP error, or a JSON-RPC error). */
  ListenRefused: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_REFUSED',
  /** Client: the listen request could not be sent, or no answer came (connection refused, DNS, reset). */
  ListenFailed: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_FAILED',
  /** Client: the event stream ended before its acknowledgement. */
  ListenEndedBeforeAck: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_ENDED_BEFORE_ACK',
  /** Client: the answer was not an event stream, or its first message was not a valid acknowledgement. */
  ListenInvalidAck: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_INVALID_ACK',
  /** Client: no acknowledgement within `ackTimeoutMs`. */
  ListenAckTimeout: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_ACK_TIMEOUT',
  /** Client: the caller's `signal` aborted the listen request before its acknowledgement. */
  ListenAborted: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_ABORTED',
  /** Client: an event of the stream exceeded `maxEventBytes`; the stream was cut. */
  ListenEventTooLarge: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_EVENT_TOO_LARGE',
  /** Client: an acknowledged stream sent nothing, not even a keepalive, for `idleTimeoutMs`; it was cut. */
  ListenIdleTimeout: 'ERR_MCP_SUBSCRIPTIONS_LISTEN_IDLE_TIMEOUT',
  /** Client: `waitFor()` saw no matching notification within its `timeoutMs`. */
  WaitTimeout: 'ERR_MCP_SUBSCRIPTIONS_WAIT_TIMEOUT',
  /** Client: the subscription ended before `waitFor()` saw a matching notification. */
  WaitEnded: 'ERR_MCP_SUBSCRIPTIONS_WAIT_ENDED',
});

/** One of the codes in {@link ErrorCode}. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Base class of every error this package throws. */
export class McpSubscriptionsError extends Error {
  /** A stable identifier: compare it, not the class. */
  readonly code: ErrorCodeValue;

  constructor(code: ErrorCodeValue, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Thrown at construction when an option is wrong; its `code` names the check that failed. */
export class OptionsError extends McpSubscriptionsError {
  constructor(code: ErrorCodeValue, message: string) {
    super(code, `mcp-subscriptions: ${message}`);
  }
}

/** Thrown by `publish()` when host code hands the hub an event that cannot be delivered. */
export class EventError extends McpSubscriptionsError {
  constructor(message: string) {
    super(ErrorCode.InvalidEvent, `mcp-subscriptions: ${message}`);
  }
}

/**
 * A host check that took longer than `authorizeTimeoutMs`. Never thrown into host code: its item is
 * left out, and the error reaches the logger and the `CheckError` diagnostics channel.
 */
export class CheckTimeoutError extends McpSubscriptionsError {
  constructor(timeoutMs: number) {
    super(ErrorCode.CheckTimeout, `mcp-subscriptions: an authorization check took longer than ${timeoutMs} ms`);
  }
}

/**
 * A listen request's checks together took longer than `authorizeDeadlineMs`. Never thrown into host
 * code: it is the reason of the aborted `signal` the checks still in flight were handed.
 */
export class AuthorizeDeadlineError extends McpSubscriptionsError {
  constructor(deadlineMs: number) {
    super(
      ErrorCode.AuthorizeDeadline,
      `mcp-subscriptions: the authorization of a listen request took longer than ${deadlineMs} ms`,
    );
  }
}

export type { RefusalReason };

/** The JSON-RPC code of each refusal (spec §6). */
const REFUSAL_RPC_CODE: Readonly<Record<RefusalReason, number>> = Object.freeze({
  'parse-error': RpcErrorCode.ParseError,
  'invalid-request': RpcErrorCode.InvalidRequest,
  'unsupported-media-type': RpcErrorCode.InvalidRequest,
  'not-acceptable': RpcErrorCode.InvalidRequest,
  'body-too-large': RpcErrorCode.InvalidRequest,
  'invalid-params': RpcErrorCode.InvalidParams,
  'header-mismatch': RpcErrorCode.HeaderMismatch,
  'unsupported-protocol-version': RpcErrorCode.UnsupportedProtocolVersion,
  'method-not-found': RpcErrorCode.MethodNotFound,
  'missing-capability': RpcErrorCode.MissingRequiredClientCapability,
  capacity: RpcErrorCode.InternalError,
  'shutting-down': RpcErrorCode.InternalError,
  internal: RpcErrorCode.InternalError,
});

/**
 * A client's request refused with a JSON-RPC error before any stream opened. lib/http.ts writes it
 * as a JSON-RPC error response, with the HTTP status of its `reason`.
 */
export class ProtocolError extends McpSubscriptionsError {
  /** Why the request was refused: decides the JSON-RPC code and the HTTP status. */
  readonly reason: RefusalReason;
  /** The JSON-RPC error code (see {@link RpcErrorCode}). */
  readonly rpcCode: number;
  /** The JSON-RPC error's `data`, when the spec defines one. */
  readonly data: unknown;
  /** The request's id, echoed in the error response; `null` when it could not be read. */
  readonly id: string | number | null;
  /** Seconds a `Retry-After` header names, for the refusals a client may retry (capacity, shutdown). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    reason: RefusalReason,
    message: string,
    options: { id?: string | number | null; data?: unknown; retryAfterSeconds?: number } = {},
  ) {
    super(ErrorCode.Protocol, message);
    this.reason = reason;
    this.rpcCode = REFUSAL_RPC_CODE[reason];
    this.id = options.id ?? null;
    this.data = options.data;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/** The message of the capacity refusal, as the spec words it. */
export const SUBSCRIPTION_LIMIT_MESSAGE = 'Subscription limit reached';

/** Whether `error` is one of this package's errors with the given code, across package copies. */
export function hasErrorCode(error: unknown, code: string): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}

/** A value as an error message shows it, in the p-queue manner: `` `-5` (number) ``. */
export function describeValue(value: unknown): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'object' && value !== null) text = Array.isArray(value) ? 'array' : 'object';
  else if (typeof value === 'function') text = 'function';
  else text = String(value);
  return `\`${text}\` (${value === null ? 'null' : typeof value})`;
}
