/**
 * What a subscription hears and why it ends: the shapes that the client's errors (`WaitForError` lists
 * what arrived) and its items (`EndItem` carries a `ListenError`) share. A leaf that imports no file of
 * ours, so that errors.ts and types.ts need not import each other; types.ts re-exports every type here,
 * so that it still lists every public type of the client. Types only.
 */

/** Why a subscription ended. */
export type EndReason =
  /** The server ended the stream with its terminal result (and no re-listen followed). */
  | 'complete'
  /** `close()`, the iterator's `return()` (a `break` out of `for await`), or the caller's `signal`. */
  | 'closed'
  /** The stream broke without the terminal result (and re-listening, if on, gave up). */
  | 'lost'
  /** The buffer was full under `overflow: 'close'`. */
  | 'overflow'
  /** A re-listen was refused for good (a 4xx other than 408 and 429): see `subscription.error`. */
  | 'refused';

/** A JSON-RPC notification as it came on the stream. */
export interface JsonRpcNotification {
  readonly jsonrpc: '2.0';
  readonly method: string;
  readonly params?: NotificationParams;
}

/** A notification's `params`: `_meta` (with the subscription id) and the method's own fields (`uri`, …). */
export interface NotificationParams {
  readonly _meta?: Readonly<Record<string, unknown>>;
  readonly [field: string]: unknown;
}

/** A change notification. */
export interface NotificationItem {
  readonly type: 'notification';
  /** `notifications/resources/updated`, `notifications/tools/list_changed`, … */
  readonly method: string;
  /** The notification's params (`{}` when it had none): `params.uri` for a resource update. */
  readonly params: NotificationParams;
  /** The JSON-RPC message, as received. */
  readonly message: JsonRpcNotification;
}
