/**
 * `mcp-subscriptions/client`: a `subscriptions/listen` client for Node (MCP 2026-07-28), for a host
 * app's own tests and for services that consume another MCP server's changes. It speaks to any server
 * that serves listen (this package's middleware and module, the official SDK's `createMcpHandler`),
 * over the global `fetch` (or the one you pass): no SDK, no `node:http`.
 *
 * Deliberately NOT exported: the SSE parser, the buffer and the connection behind a subscription; they
 * change whenever the client needs them to.
 */
import { resolveListen } from './options.ts';
import { ListenSubscription } from './subscription.ts';
import type { ListenFilter, ListenOptions } from './types.ts';

/**
 * Opens a listen stream, and resolves once the server acknowledged it, with a subscription whose
 * `honored` says what the server agreed to deliver. The request is the spec's (§1, §5): a POST with
 * `Content-Type: application/json`, `Accept: application/json, text/event-stream`,
 * `MCP-Protocol-Version: 2026-07-28` and `Mcp-Method: subscriptions/listen`, your `headers` added.
 *
 * Rejects with a {@link ListenError} whose `code` says why (`ErrorCode.ListenRefused` with the HTTP
 * `status`, the JSON-RPC `rpcCode` and `data`, and `retryAfterMs` for a 503; `ListenFailed`,
 * `ListenEndedBeforeAck`, `ListenInvalidAck`, `ListenAckTimeout`, `ListenAborted`). A mistake in the
 * arguments throws an `OptionsError` at once, before anything is sent.
 *
 * @param url The MCP endpoint: an absolute `http:` or `https:` URL (`http://127.0.0.1:3000/mcp`).
 * @param filter What to hear about (spec §1).
 * @example
 * ```ts
 * const subscription = await listen(url, { toolsListChanged: true }, { headers: { authorization: 'Bearer alice-token' } });
 * await fetch(`${base}/api/catalog/tools`, { method: 'POST', headers: { authorization: 'Bearer alice-token' } });
 * await subscription.waitFor('notifications/tools/list_changed');
 * await subscription.close();
 * ```
 */
export function listen(url: string | URL, filter: ListenFilter, options?: ListenOptions): Promise<ListenSubscription> {
  return ListenSubscription.open(resolveListen(url, filter, options));
}

export { ListenError, WaitForError } from './errors.ts';
export type { ListenErrorCode, ListenErrorDetails, WaitForErrorCode } from './errors.ts';
export type { ListenSubscription } from './subscription.ts';
export type {
  DroppedItem,
  EndItem,
  EndReason,
  FetchInit,
  FetchLike,
  FetchResponse,
  GapItem,
  JsonRpcNotification,
  ListenFilter,
  ListenHeaders,
  ListenOptions,
  NotificationItem,
  NotificationMatch,
  NotificationParams,
  OverflowPolicy,
  ReconnectOptions,
  SubscriptionItem,
  WaitForOptions,
} from './types.ts';
export { ErrorCode, hasErrorCode } from '../../lib/internal.ts';
export type { NotificationFilter, RequestId } from '../../lib/internal.ts';
