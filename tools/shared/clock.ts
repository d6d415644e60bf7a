/**
 * The one clock of the bench and the soak: a server process stamps each publish with it, a client
 * process each arrival, and the two are compared (publish→receive latency).
 */
import { performance } from 'node:perf_hooks';

/** Milliseconds, monotonic, comparable across processes on this machine (`timeOrigin + now()`). */
export function now(): number {
  return performance.timeOrigin + performance.now();
}
