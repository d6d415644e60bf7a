/**
 * Server-sent-event framing for listen streams (spec §5). A leaf module: the only place that knows
 * the bytes of an SSE frame.
 */

/** Response headers of a listen stream. */
export const SSE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Type': 'text/event-stream',
  'Cache-Control': 'no-cache, no-transform',
  'X-Accel-Buffering': 'no',
  Connection: 'keep-alive',
});

const FRAME_HEAD = 'event: message\ndata: ';
const FRAME_TAIL = '\n\n';

/**
 * One JSON-RPC message as one SSE event. `json` must be a single line: `JSON.stringify` output is,
 * since it escapes every line break inside strings.
 */
export function sseFrame(json: string): string {
  return FRAME_HEAD + json + FRAME_TAIL;
}

/**
 * A frame split around a spot where each stream's own text goes (its subscription id), so an event is
 * serialized once per publish and each stream only joins three strings.
 */
export interface SplitFrame {
  readonly head: string;
  readonly tail: string;
}

/** Splits `FRAME_HEAD + before + <per-stream> + after + FRAME_TAIL` into a {@link SplitFrame}. */
export function splitFrame(before: string, after: string): SplitFrame {
  return { head: FRAME_HEAD + before, tail: after + FRAME_TAIL };
}

/** A keepalive: an SSE comment line, which clients ignore (spec §5). */
export const KEEPALIVE_FRAME = ': keepalive\n\n';
