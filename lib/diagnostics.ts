/**
 * `node:diagnostics_channel` channels. Payloads name the honoured filter's kinds and counts, never a
 * URI or a task id: those can be confidential.
 */
import diagnostics from 'node:diagnostics_channel';

/** Channel names, for `diagnostics_channel.subscribe(name, fn)`. */
export const DiagnosticsChannel = Object.freeze({
  /** A stream opened: `{ principal, filter }`. */
  StreamOpen: 'mcp-subscriptions:stream:open',
  /** A stream closed: `{ principal, reason, filter }`. */
  StreamClose: 'mcp-subscriptions:stream:close',
  /** An event was delivered locally: `{ kind, matched, written, queued, coalesced, dropped }`. */
  Publish: 'mcp-subscriptions:publish',
  /** A stream's queue overflowed: `{ principal, policy, queued }`. */
  Overflow: 'mcp-subscriptions:overflow',
  /** A host check or hook failed and its item was dropped: `{ stage, error }`. */
  CheckError: 'mcp-subscriptions:check:error',
});

export const streamOpenChannel = diagnostics.channel(DiagnosticsChannel.StreamOpen);
export const streamCloseChannel = diagnostics.channel(DiagnosticsChannel.StreamClose);
export const publishChannel = diagnostics.channel(DiagnosticsChannel.Publish);
export const overflowChannel = diagnostics.channel(DiagnosticsChannel.Overflow);
export const checkErrorChannel = diagnostics.channel(DiagnosticsChannel.CheckError);

/** Where runtime failures are reported. `console` fits; so do pino and winston loggers. */
export interface Logger {
  warn(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/** The default logger: one line on stderr per report. */
export const consoleLogger: Logger = Object.freeze({
  warn: (message: string, details?: Record<string, unknown>) =>
    console.warn(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
  error: (message: string, details?: Record<string, unknown>) =>
    console.error(`[mcp-subscriptions] ${message}`, ...(details ? [details] : [])),
});
