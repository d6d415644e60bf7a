/**
 * The load generator's rounds, which more than one scenario runs: a round of events is collected
 * once every stream has them or the server holding the streams has gone quiet, and a burst of writes
 * through a write route is measured end to end (deliveries, latencies, batching, server CPU).
 */
import { now } from '../../tools/shared/clock.ts';
import { cpuBetween, noteWriter, sleep, type StreamReader, usage, waitFor } from './client.ts';

/**
 * Whether the server on `port` is idle: it used under a tenth of a 100 ms window's CPU time. Two
 * control requests, a fraction of a millisecond of its CPU.
 */
async function serverIdle(port: number): Promise<boolean> {
  const a = await usage(port);
  await sleep(100);
  const b = await usage(port);
  return cpuBetween(a, b) < 0.1 * (b.at - a.at) * 1000;
}

/**
 * Waits until every reader has `events` frames past `base`, or until nothing arrived anywhere for
 * 300 ms since `sentAt` and the server holding the streams (`port`) is idle: a server may coalesce
 * identical events for a socket that pushes back, so a stream may get fewer frames, while a busy
 * server is only late (the SDK, under a 1,000 × 200 burst, starts writing a second after the publish
 * and pauses as long between writes). Then collects the round: frames received, publish→receive
 * latencies (frame j is event j, except a last frame that arrives short of `events`: it carries the
 * latest event), and when the last stream had its last frame.
 */
export async function collectRound(
  readers: readonly StreamReader[],
  base: readonly number[],
  t: readonly number[],
  events: number,
  sentAt: number,
  latencies: number[],
  port: number,
): Promise<{ frames: number; last: number; complete: boolean }> {
  const lastAny = (): number => readers.reduce((m, x) => Math.max(m, x.lastAt), 0);
  const done = (): boolean => readers.every((x, i) => x.events >= (base[i] as number) + events);
  const quiet = (): boolean => now() - sentAt > 300 && now() - lastAny() > 300;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    await waitFor(() => done() || quiet(), deadline - Date.now(), 10);
    if (done() || ((await serverIdle(port)) && quiet())) break;
  }
  let frames = 0;
  let last = 0;
  let complete = true;
  readers.forEach((x, i) => {
    const from = base[i] as number;
    const m = x.events - from;
    frames += m;
    if (m === 0) {
      complete = false;
      return;
    }
    for (let j = 0; j < m && from + j < x.times.length; j++) {
      const event = j === m - 1 ? events - 1 : j;
      latencies.push((x.times[from + j] as number) - (t[event] as number));
    }
    last = Math.max(last, x.times[Math.min(from + m, x.times.length) - 1] as number);
  });
  return { frames, last, complete };
}

/** One burst of writes and what the streams made of it. */
export interface Burst {
  /** Stream × event pairs per second, until each stream had its last frame. */
  deliveriesPerSec: number;
  /** From the first write sent to the last stream's last frame. */
  seconds: number;
  /** Writes the write route answered per second. */
  writesPerSec: number;
  framesPerStream: number;
  /** Frames per chunk the client read: above 1 where the server wrote several events in one write. */
  framesPerChunk: number;
  /** Publish→receive latencies of every frame, in ms. */
  latencies: number[];
  /** Server CPU per write, in µs, of each port in `cpuPorts`. */
  cpuUsPerEvent: number[];
  complete: boolean;
}

/**
 * `events` writes of note `name` through the write route of `writePort`, back to back on one
 * kept-alive connection (each sent when the previous one was answered), to `readers`, which hold the
 * note's URI, on the server `cpuPorts[0]`. With `intervalMs`, write `k` is sent no earlier than
 * `intervalMs × k` after the first (a rate cap: the writes of two setups compared at one rate). A stream is done when it has a frame per write, or when
 * nothing arrived anywhere for 300 ms and that server is idle (the fan-out's rule: a socket that pushed
 * back got identical events coalesced, and its last frame stands for the last write).
 */
export async function writeBurst(
  readers: readonly StreamReader[],
  writePort: number,
  cpuPorts: readonly number[],
  name: string,
  events: number,
  intervalMs = 0,
): Promise<Burst> {
  const writer = noteWriter(writePort);
  try {
    // Opens the connection on a note no stream holds, so the first timed write does not pay for it.
    await writer.put(`${name}-primer`, 0);
    const base = readers.map((x) => x.events);
    const chunks0 = readers.reduce((sum, x) => sum + x.chunks, 0);
    const u0 = await Promise.all(cpuPorts.map((port) => usage(port)));
    const t = new Array<number>(events);
    const first = now();
    for (let k = 0; k < events; k++) {
      const due = first + intervalMs * k;
      if (now() < due) await sleep(due - now());
      t[k] = now();
      await writer.put(name, k);
    }
    const written = now();
    const latencies: number[] = [];
    const { frames, last, complete } = await collectRound(
      readers,
      base,
      t,
      events,
      written,
      latencies,
      cpuPorts[0] as number,
    );
    const u1 = await Promise.all(cpuPorts.map((port) => usage(port)));
    const seconds = (last - (t[0] as number)) / 1000;
    return {
      deliveriesPerSec: (readers.length * events) / seconds,
      seconds,
      writesPerSec: events / ((written - (t[0] as number)) / 1000),
      framesPerStream: frames / readers.length,
      framesPerChunk: frames / (readers.reduce((sum, x) => sum + x.chunks, 0) - chunks0),
      latencies,
      cpuUsPerEvent: u0.map((u, i) => cpuBetween(u, u1[i]!) / events),
      complete,
    };
  } finally {
    writer.close();
  }
}
