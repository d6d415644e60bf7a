/**
 * `node:diagnostics_channel` channels. Payloads name the honoured filter's kinds and counts, never a
 * URI or a task id: those can be confidential.
 */
import { channel } from 'node:diagnostics_channel';
import type { Logger } from './types.ts';

/**
 * Channel names, for `diagnostics_channel.subscribe(name, fn)`. Each payload's shape is a type in
 * lib/types.ts, and the engine publishes exactly that shape (checked by the compiler).
 */
export const DiagnosticsChannel = Object.freeze({
  /** A stream opened and was registered: a `StreamOpenMessage`, `{ principal, filter }`. */
  StreamOpen: 'mcp-subscriptions:stream:open',
  /** A registered stream closed: a `StreamCloseMessage`, `{ principal, reason, filter }`. */
  StreamClose: 'mcp-subscriptions:stream:close',
  /**
   * An event matched streams of this node: a `PublishMessage`,
   * `{ kind, matched, written, queued, coalesced }`.
   */
  Publish: 'mcp-subscriptions:publish',
  /**
   * A host check or hook failed and its item was left out: a `CheckErrorMessage`,
   * `{ stage, errorName, errorCode }` (never the error itself: it may quote the URI).
   */
  CheckError: 'mcp-subscriptions:check:error',
  /**
   * A listen reached the MCP SDK's own listen handler past this library and was refused (a mount-order
   * mistake, docs/mount-order.md): an `UncheckedListenMessage`, `{ uncheckedListens }`.
   */
  UncheckedListen: 'mcp-subscriptions:listen:unchecked',
});

export const streamOpenChannel = channel(DiagnosticsChannel.StreamOpen);
export const streamCloseChannel = channel(DiagnosticsChannel.StreamClose);
export const publishChannel = channel(DiagnosticsChannel.Publish);
export const checkErrorChannel = channel(DiagnosticsChannel.CheckError);
export const uncheckedListenChannel = channel(DiagnosticsChannel.UncheckedListen);

/** The default logger: one line on stderr per report. */
export const consoleLogger: Logger = Object.freeze({
  warn: (message: string, details?: Record<string, unknown>) =>
    console.warn(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
  error: (message: string, details?: Record<string, unknown>) =>
    console.error(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
});
