/**
 * Error classes and the one table that maps a JSON-RPC error raised before a stream opens to its HTTP
 * status. A leaf module. Check errors by their `code`, never with `instanceof`: two copies of the
 * package in one app still agree on a string.
 */

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

/** Stable `code` strings of this package's errors. */
export const ErrorCode = Object.freeze({
  /** A programmer's mistake in options, thrown at construction. */
  InvalidOption: 'ERR_MCP_SUBSCRIPTIONS_INVALID_OPTION',
  /** A host published an event that is not valid (a relative URI, an unknown kind). */
  InvalidEvent: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT',
  /** A client's listen request was refused before the stream opened; carries the JSON-RPC error. */
  Protocol: 'ERR_MCP_SUBSCRIPTIONS_PROTOCOL',
});

/** Base class of every error this package throws. */
export class McpSubscriptionsError extends Error {
  /** A stable identifier: compare it, not the class. */
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Thrown at construction when an option is wrong (a negative bound, a missing hub). */
export class OptionsError extends McpSubscriptionsError {
  constructor(message: string) {
    super(ErrorCode.InvalidOption, `mcp-subscriptions: ${message}`);
  }
}

/** Thrown by `publish()` when host code hands the hub an event that cannot be delivered. */
export class EventError extends McpSubscriptionsError {
  constructor(message: string) {
    super(ErrorCode.InvalidEvent, `mcp-subscriptions: ${message}`);
  }
}

/**
 * A client's request refused with a JSON-RPC error before any stream opened. The engine writes it as
 * a JSON-RPC error response with the status from {@link httpStatusFor}.
 */
export class ProtocolError extends McpSubscriptionsError {
  /** The JSON-RPC error code (see {@link RpcErrorCode}). */
  readonly rpcCode: number;
  /** The JSON-RPC error's `data`, when the spec defines one. */
  readonly data: unknown;
  /** The HTTP status to answer with. */
  readonly httpStatus: number;
  /** Extra HTTP response headers (e.g. `Retry-After`). */
  readonly headers: Readonly<Record<string, string>>;
  /** The request's id, echoed in the error response; `null` when it could not be read. */
  readonly id: string | number | null;

  constructor(
    rpcCode: number,
    message: string,
    options: {
      id?: string | number | null;
      data?: unknown;
      httpStatus?: number;
      headers?: Record<string, string>;
    } = {},
  ) {
    super(ErrorCode.Protocol, message);
    this.rpcCode = rpcCode;
    this.id = options.id ?? null;
    this.data = options.data;
    this.httpStatus = options.httpStatus ?? httpStatusFor(rpcCode);
    this.headers = Object.freeze({ ...options.headers });
  }
}

/** The message of the capacity refusal, as the spec words it. */
export const SUBSCRIPTION_LIMIT_MESSAGE = 'Subscription limit reached';

const HTTP_STATUS: ReadonlyMap<number, number> = new Map([
  [RpcErrorCode.ParseError, 400],
  [RpcErrorCode.InvalidRequest, 400],
  [RpcErrorCode.InvalidParams, 400],
  [RpcErrorCode.HeaderMismatch, 400],
  [RpcErrorCode.UnsupportedProtocolVersion, 400],
  [RpcErrorCode.MissingRequiredClientCapability, 400],
  [RpcErrorCode.MethodNotFound, 404],
  // -32603 before a stream opens is only ever the capacity refusal (spec §6).
  [RpcErrorCode.InternalError, 503],
]);

/** The HTTP status for a JSON-RPC error raised before a listen stream opens (spec §6). */
export function httpStatusFor(rpcCode: number): number {
  return HTTP_STATUS.get(rpcCode) ?? 400;
}

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
