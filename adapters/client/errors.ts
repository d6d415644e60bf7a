/**
 * The client's runtime errors. Both belong to the package's hierarchy (`McpSubscriptionsError`) and are
 * told apart by `code` (docs/error-codes.md), never by `instanceof`: two copies of the package agree.
 */
import { McpSubscriptionsError, type ErrorCode, type RequestId } from '../../lib/internal.ts';
import type { EndReason, NotificationItem } from './notifications.ts';

/** The codes a {@link ListenError} may carry, one per reason. */
export type ListenErrorCode =
  | typeof ErrorCode.ListenRefused
  | typeof ErrorCode.ListenFailed
  | typeof ErrorCode.ListenEndedBeforeAck
  | typeof ErrorCode.ListenInvalidAck
  | typeof ErrorCode.ListenAckTimeout
  | typeof ErrorCode.ListenAborted
  | typeof ErrorCode.ListenEventTooLarge
  | typeof ErrorCode.ListenIdleTimeout;

/** What a {@link ListenError} knows beyond its code and message; every field only where known. */
export interface ListenErrorDetails {
  readonly id?: RequestId;
  readonly status?: number;
  readonly rpcCode?: number;
  readonly data?: unknown;
  readonly retryAfterMs?: number;
  readonly body?: string;
  readonly cause?: unknown;
}

/**
 * A listen request that did not get as far as its acknowledgement: `listen()` rejects with it, and a
 * subscription whose re-listen failed for good carries it as `subscription.error`.
 *
 * | `code` (`ErrorCode.`)  | when                                                                                 |
 * | ---------------------- | ------------------------------------------------------------------------------------ |
 * | `ListenRefused`        | an HTTP error answer (401, 400, 503, …), or a JSON-RPC error (in a JSON body, or as the stream's first message) |
 * | `ListenFailed`         | no answer: the connection was refused or reset, the host is unknown (`cause` says)    |
 * | `ListenEndedBeforeAck` | a `200` event stream that ended (or broke) before its first message                  |
 * | `ListenInvalidAck`     | not an event stream, or a first message that is not this request's acknowledgement   |
 * | `ListenAckTimeout`     | no acknowledgement within `ackTimeoutMs`                                              |
 * | `ListenAborted`        | the caller's `signal` aborted first (`cause` is its reason)                           |
 * | `ListenEventTooLarge`  | an event past `maxEventBytes` (as the acknowledgement, or later: the stream is cut)   |
 * | `ListenIdleTimeout`    | after the acknowledgement, nothing (not even a keepalive) for `idleTimeoutMs`         |
 *
 * @example
 * ```ts
 * try {
 *   await listen(url, filter);
 * } catch (error) {
 *   if (hasErrorCode(error, ErrorCode.ListenRefused) && error.status === 503) retryIn(error.retryAfterMs);
 * }
 * ```
 */
export class ListenError extends McpSubscriptionsError {
  declare readonly code: ListenErrorCode;
  /** The listen request's id. */
  readonly id: RequestId | undefined;
  /** The HTTP status of the answer; `undefined` when none came (`ListenFailed`, a timeout, an abort). */
  readonly status: number | undefined;
  /** The JSON-RPC error's `code` (`-32602`, `-32603`, …), when the answer was a JSON-RPC error. */
  readonly rpcCode: number | undefined;
  /** The JSON-RPC error's `data` (for -32022, `{ supported, requested }`), when it had one. */
  readonly data: unknown;
  /** How long the server asked to wait before trying again (`Retry-After`, seconds or an HTTP date), in ms. */
  readonly retryAfterMs: number | undefined;
  /** The body of an error answer as text (its first 64 KiB), for answers that are not JSON-RPC (a host's 401). */
  readonly body: string | undefined;

  constructor(code: ListenErrorCode, message: string, details: ListenErrorDetails = {}) {
    super(code, `mcp-subscriptions: ${message}`);
    this.id = details.id;
    this.status = details.status;
    this.rpcCode = details.rpcCode;
    this.data = details.data;
    this.retryAfterMs = details.retryAfterMs;
    this.body = details.body;
    if (details.cause !== undefined) this.cause = details.cause;
  }
}

/** The codes a {@link WaitForError} may carry. */
export type WaitForErrorCode = typeof ErrorCode.WaitTimeout | typeof ErrorCode.WaitEnded;

/**
 * `subscription.waitFor()` gave up: no matching notification within its `timeoutMs`
 * (`ErrorCode.WaitTimeout`), or the subscription ended first (`ErrorCode.WaitEnded`, with its
 * `reason`). The message names what was awaited and lists what arrived instead, so a failing test
 * says why by itself.
 */
export class WaitForError extends McpSubscriptionsError {
  declare readonly code: WaitForErrorCode;
  /** What was awaited: the method, or the predicate's source. */
  readonly awaited: string;
  /** The notifications consumed while waiting, that did not match (the last 100). */
  readonly received: readonly NotificationItem[];
  /** With `WaitEnded`: why the subscription ended. */
  readonly reason: EndReason | undefined;

  constructor(
    code: WaitForErrorCode,
    message: string,
    details: { awaited: string; received: readonly NotificationItem[]; reason?: EndReason },
  ) {
    super(code, `mcp-subscriptions: ${message}`);
    this.awaited = details.awaited;
    this.received = details.received;
    this.reason = details.reason;
  }
}
