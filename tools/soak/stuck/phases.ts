/**
 * The stuck run's timeline: its phases (baseline, stuck, after, churn), each with what the server,
 * the driver's own event loop and the kernel went through in it, and the segments of the stuck phase
 * that the healthy readers' latency is told apart by.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { now } from '../../shared/clock.ts';
import type { ServerProcess } from '../harness.ts';
import type { MemorySample, PhaseSample } from '../messages.ts';
import type { HealthyProcess } from './healthy-process.ts';
import type { TcpMemoryGuard } from './kernel.ts';

export interface Phase {
  readonly name: string;
  start: number;
  end: number;
  sample?: PhaseSample;
  /** Heap after GC at the end of the phase. */
  memory?: MemorySample;
  driverDelayP99Ms: number;
  driverDelayMaxMs: number;
  tcpMemPeak: number;
  opened: number;
  closed: Record<string, number>;
}

/** A part of the stuck phase, in publish times (tools/shared/clock.ts); `end` is 0 while it lasts. */
export interface Segment {
  readonly name: string;
  readonly start: number;
  end: number;
  /** `false`: its events are measured on their own but left out of the phase around it. */
  readonly counted: boolean;
}

export class Timeline {
  readonly phases: Phase[] = [];
  /**
   * Parts of the stuck phase, for the healthy readers' latency: the stopped readers connecting and
   * filling their sockets, all of them held until the stall timeout, the stall closes, the stopped
   * readers reading again and leaving. The run's own full GC (to measure what the server holds) stops
   * the server: events published during it count in no phase's latency, as no host pays for it.
   */
  readonly segments: Segment[] = [];
  /** The driver's (this process's) event loop: it holds the stopped readers and the churners. */
  private readonly driverDelay = monitorEventLoopDelay({ resolution: 10 });

  /** `previous`: the server's sample before the first phase, which its counts are taken from. */
  constructor(
    private readonly server: ServerProcess,
    private readonly guard: TcpMemoryGuard,
    private readonly healthy: HealthyProcess,
    private previous: PhaseSample,
  ) {
    this.driverDelay.enable();
  }

  begin(name: string): Phase {
    const phase: Phase = {
      name,
      start: now(),
      end: 0,
      driverDelayP99Ms: 0,
      driverDelayMaxMs: 0,
      tcpMemPeak: 0,
      opened: 0,
      closed: {},
    };
    this.phases.push(phase);
    this.healthy.mark(name);
    this.driverDelay.reset();
    this.guard.resetPeak();
    return phase;
  }

  /** Ends the phase begun last: its figures, and the server's sample and memory after GC. */
  async end(): Promise<void> {
    const phase = this.phases.at(-1);
    if (phase === undefined) throw new Error('no phase begun');
    phase.end = now();
    phase.driverDelayP99Ms = this.driverDelay.percentile(99) / 1e6;
    phase.driverDelayMaxMs = this.driverDelay.max / 1e6;
    phase.tcpMemPeak = this.guard.peak;
    const { sample } = await this.server.call('sample');
    phase.sample = sample;
    phase.memory = (await this.server.call('memory')).memory;
    phase.opened = sample.stats.opened - this.previous.stats.opened;
    for (const [reason, n] of Object.entries(sample.stats.closed)) {
      const delta = n - (this.previous.stats.closed[reason as keyof typeof sample.stats.closed] ?? 0);
      if (delta !== 0) phase.closed[reason] = delta;
    }
    this.previous = sample;
  }

  /** Ends the current segment, and begins `name` unless it is empty. */
  segment(name: string, counted = true): void {
    const at = now();
    const last = this.segments.at(-1);
    if (last !== undefined && last.end === 0) last.end = at;
    if (name !== '') this.segments.push({ name, start: at, end: 0, counted });
  }
}
