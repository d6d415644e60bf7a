/**
 * The stuck run's healthy readers (`npm run soak -- --stuck`), in a process of their own:
 * `--healthy` listens that read every byte at once and check every numbered event the server's
 * publisher sends them (task events whose `statusMessage` is "<number> <publish time>"): each arrives
 * once, in order, and its delivery latency is the time from its publish to its arrival here.
 *
 * A process of their own because the driver beside them holds thousands of stopped readers, makes
 * churn and, at the end of the stuck phase, reads hundreds of megabytes those readers left unread: its
 * event loop stalls for up to a second then, and readers sharing it would stop reading, measure the
 * driver and, with small socket buffers, even make the server queue and coalesce their events. Here
 * nothing else runs, so what they measure is the server (and the machine).
 *
 * Forked by healthy-process.ts with `SOAK_HEALTHY_CONFIG`; it connects, answers `ready`, then takes `mark` (a
 * phase begins: its own event-loop delay so far belongs to the previous one) and `finish` (the last
 * event's number and the phases' time windows: it waits for every reader to have it, answers with the
 * figures per window, hangs up and exits).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { now } from '../../shared/clock.ts';
import { sortedPercentile } from '../../shared/stats.ts';
import { type Listen, type ListenPlan, openMany } from '../client.ts';

/** Task ids the numbered events rotate over: a healthy stream may fall this many events behind and lose none. */
export const SEQ_KEYS = 64;

/** Healthy reader `i` of those numbered from `offset`: principal `h`, following every numbered task id. */
export const healthyPlan =
  (offset: number) =>
  (i: number): ListenPlan => ({
    cycle: offset + i,
    principal: 'h',
    id: `h${offset + i}`,
    notifications: { taskIds: Array.from({ length: SEQ_KEYS }, (_, k) => `h:${k}`) },
    tasks: true,
  });

export interface HealthyConfig {
  readonly port: number;
  readonly count: number;
  /** The cycle (`x-soak-cycle`) of the first reader; the others follow. */
  readonly firstCycle: number;
}

/** A window of publish times (tools/shared/clock.ts, as the server stamps them). */
export interface Window {
  readonly name: string;
  readonly start: number;
  readonly end: number;
  /** `false`: its events are measured on their own but left out of the phase around it. */
  readonly counted: boolean;
}

export type HealthyRequest =
  | { readonly type: 'mark'; readonly name: string }
  | {
      readonly type: 'finish';
      /** How many numbered events were published (numbers 0 to `published` − 1). */
      readonly published: number;
      readonly phases: readonly Window[];
      readonly segments: readonly Window[];
    };

export interface WindowFigures {
  readonly name: string;
  /** Numbered events published in the window (as the first reader counts them), and deliveries. */
  readonly events: number;
  readonly deliveries: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface HealthyResult {
  readonly acked: number;
  /** Readers whose connection was still open at the end (none may have been closed by the server). */
  readonly stillOpen: number;
  /** Every reader had the last event within the wait. */
  readonly caughtUp: boolean;
  readonly lost: number;
  /** Events that came again, or earlier than one already received. */
  readonly repeated: number;
  /** Messages that broke the protocol (no acknowledgement first, a terminal result, …). */
  readonly problems: number;
  readonly phases: readonly WindowFigures[];
  readonly segments: readonly WindowFigures[];
  /** This process's event-loop delay per phase (between marks). */
  readonly loopDelay: Readonly<Record<string, { readonly p99Ms: number; readonly maxMs: number }>>;
}

export type HealthyReply = { readonly type: 'ready'; readonly acked: number } | HealthyFinished;
export interface HealthyFinished {
  readonly type: 'finished';
  readonly result: HealthyResult;
}

/** A growable pair of columns: each event's publish time (from `base`) and latency, as float32s. */
class Deliveries {
  private published: Float32Array<ArrayBuffer> = new Float32Array(1 << 16);
  private latency: Float32Array<ArrayBuffer> = new Float32Array(1 << 16);
  length = 0;

  constructor(private readonly base: number) {}

  push(publishedAt: number, latencyMs: number): void {
    if (this.length === this.published.length) {
      const grow = (from: Float32Array<ArrayBuffer>): Float32Array<ArrayBuffer> => {
        const to = new Float32Array(from.length * 2);
        to.set(from);
        return to;
      };
      this.published = grow(this.published);
      this.latency = grow(this.latency);
    }
    this.published[this.length] = publishedAt - this.base;
    this.latency[this.length++] = latencyMs;
  }

  /** The latencies of events published in `window`, and not in any of `excluded`. */
  within(window: Window, excluded: readonly Window[]): Float64Array {
    const out: number[] = [];
    const start = window.start - this.base;
    const end = window.end - this.base;
    const outside = excluded.map((w) => [w.start - this.base, w.end - this.base] as const);
    for (let i = 0; i < this.length; i++) {
      const t = this.published[i]!;
      if (t < start || t >= end || outside.some(([from, to]) => t >= from && t < to)) continue;
      out.push(this.latency[i]!);
    }
    return Float64Array.from(out).sort();
  }
}

/** One healthy reader: every numbered event once, in order. */
class Healthy {
  /** The number the next event must carry. */
  next = 0;
  lost = 0;
  repeated = 0;
  /** Publish times of the events, for the first reader only (it counts events per window). */
  readonly seen: number[] = [];

  constructor(
    readonly listen: Listen,
    deliveries: Deliveries,
    first: boolean,
  ) {
    listen.onMessage = (data, at) => {
      const marker = data.indexOf('"statusMessage":"');
      if (marker === -1) return;
      const start = marker + 17;
      const space = data.indexOf(' ', start);
      const seq = Number(data.slice(start, space));
      const publishedAt = Number(data.slice(space + 1, data.indexOf('"', space)));
      if (seq === this.next) this.next++;
      else if (seq > this.next) {
        this.lost += seq - this.next;
        this.next = seq + 1;
      } else this.repeated++;
      deliveries.push(publishedAt, at - publishedAt);
      if (first) this.seen.push(publishedAt);
    };
  }
}

async function serve(config: HealthyConfig, send: (reply: HealthyReply) => void): Promise<void> {
  const deliveries = new Deliveries(now());
  const plan = healthyPlan(config.firstCycle);
  const listens = await openMany(config.port, config.count, plan);
  const readers = listens.map((listen, i) => new Healthy(listen, deliveries, i === 0));
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const loopDelay: Record<string, { p99Ms: number; maxMs: number }> = {};
  let current = '';
  const closeMark = (): void => {
    if (current !== '') loopDelay[current] = { p99Ms: delay.percentile(99) / 1e6, maxMs: delay.max / 1e6 };
    delay.reset();
  };
  process.on('message', (request: HealthyRequest) => {
    if (request.type === 'mark') {
      closeMark();
      current = request.name;
      return;
    }
    closeMark();
    current = '';
    void finish(request.published, request.phases, request.segments).then((result) => {
      send({ type: 'finished', result });
      for (const listen of listens) listen.hangUp();
      void Promise.all(listens.map((listen) => listen.closed)).then(() => process.disconnect());
    });
  });
  send({ type: 'ready', acked: listens.filter((listen) => listen.acked).length });

  async function finish(published: number, phases: readonly Window[], segments: readonly Window[]) {
    // The last event reaches every reader, or it was lost (a reader the server closed has ended).
    const caughtUp = await listens[0]!.until(
      () => readers.every((reader) => reader.next >= published || reader.listen.ended),
      15_000,
    );
    for (const reader of readers) if (reader.next < published) reader.lost += published - reader.next;
    const excluded = segments.filter((segment) => !segment.counted);
    const seen = readers[0]?.seen ?? [];
    const figures = (window: Window, without: readonly Window[]): WindowFigures => {
      const sorted = deliveries.within(window, without);
      return {
        name: window.name,
        events: seen.filter((t) => t >= window.start && t < window.end).length,
        deliveries: sorted.length,
        p50Ms: sortedPercentile(sorted, 50),
        p99Ms: sortedPercentile(sorted, 99),
        maxMs: sortedPercentile(sorted, 100),
      };
    };
    return {
      acked: listens.filter((listen) => listen.acked).length,
      stillOpen: listens.filter((listen) => !listen.ended).length,
      caughtUp,
      lost: readers.reduce((n, reader) => n + reader.lost, 0),
      repeated: readers.reduce((n, reader) => n + reader.repeated, 0),
      problems: listens.filter((listen) => listen.problem !== undefined || listen.completed).length,
      phases: phases.map((phase) => figures(phase, excluded)),
      segments: segments.map((segment) => figures(segment, [])),
      loopDelay,
    };
  }
}

// Run as the forked healthy-readers process.
const configText = process.env['SOAK_HEALTHY_CONFIG'];
if (configText !== undefined && process.send !== undefined) {
  const send = process.send.bind(process);
  serve(JSON.parse(configText) as HealthyConfig, (reply) => void send(reply)).catch((error: unknown) => {
    console.error('soak: the healthy readers failed:', error);
    process.exit(1);
  });
}
