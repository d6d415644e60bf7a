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

/**
 * What a framework's log says of a failure, for the adapters' loggers: its name and code, as the
 * diagnostics channels do. Never its message or stack: a host check's error may quote the URI or the
 * task id it was asked about, and logs are read by more people than may know them. `undefined` when
 * the details name no failure.
 */
export function failureSummary(details: unknown): string | undefined {
  if (typeof details !== 'object' || details === null) return undefined;
  // The engine reports a failed check as `{ errorName, errorCode }` already; other failures carry `error`.
  const given = details as { error?: unknown; errorName?: unknown; errorCode?: unknown };
  let name: unknown = given.errorName;
  let code: unknown = given.errorCode;
  if ('error' in given) {
    const error = given.error;
    if (typeof error !== 'object' || error === null) return typeof error;
    name = (error as { name?: unknown }).name;
    code = (error as { code?: unknown }).code;
  } else if (name === undefined && code === undefined) {
    return undefined;
  }
  const named = typeof name === 'string' ? name : 'error';
  return typeof code === 'string' || typeof code === 'number' ? `${named} (${String(code)})` : named;
}

/** The default logger: one line on stderr per report. */
export const consoleLogger: Logger = Object.freeze({
  warn: (message: string, details?: Record<string, unknown>) =>
    console.warn(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
  error: (message: string, details?: Record<string, unknown>) =>
    console.error(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
});
