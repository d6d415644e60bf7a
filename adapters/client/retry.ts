/**
 * When to listen again, and how long to wait first: full-jitter exponential backoff, never shorter
 * than what a `Retry-After` asked for; and which failures are worth another attempt.
 */
import { ErrorCode, hasErrorCode, MAX_TIMER_MS, RpcErrorCode } from '../../lib/internal.ts';
import type { ListenError } from './errors.ts';
import type { ResolvedReconnect } from './options.ts';

/**
 * `Retry-After` in milliseconds: delay-seconds, or an HTTP date (0 once past); `undefined` when absent
 * or unreadable (RFC 9110 §10.2.3).
 */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, MAX_TIMER_MS);
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.min(Math.max(0, date - now), MAX_TIMER_MS);
}

/**
 * The wait before attempt `attempt` (1-based): a random point between 0 and the exponential step
 * (`initialDelayMs × 2^(attempt-1)`, at most `maxDelayMs`), so that clients cut off together do not
 * come back together; then at least `retryAfterMs`.
 */
export function backoffDelay(
  reconnect: ResolvedReconnect,
  attempt: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  const step = Math.min(reconnect.maxDelayMs, reconnect.initialDelayMs * 2 ** Math.min(attempt - 1, 30));
  return Math.min(Math.max(Math.floor(random() * step), retryAfterMs ?? 0), MAX_TIMER_MS);
}

/**
 * Whether a failed re-listen is worth another attempt: anything but a refusal is (the server was down,
 * restarting, slow, or half up and answering oddly); a refusal is when its HTTP status is 408, 429 or
 * 5xx, or its JSON-RPC code -32603 (capacity, shutdown, a failure of the server's). Any other refusal
 * (401, 403, 404, a -32602 for a filter the server no longer takes) would be refused again.
 */
export function isRetryable(error: ListenError): boolean {
  if (!hasErrorCode(error, ErrorCode.ListenRefused)) return true;
  const { status, rpcCode } = error;
  if (status !== undefined && (status === 408 || status === 429 || status >= 500)) return true;
  // "Internal error": the capacity refusal in-band (the SDK answers it with HTTP 200), or a failure of the server's.
  return rpcCode === RpcErrorCode.InternalError && (status === undefined || status < 300);
}
