/**
 * The stuck run's stopped readers: `--stuck-readers` clients, each on a TCP connection of its own,
 * open a listen for the load events with a `--id-bytes` id (it rides in every frame, so their sockets
 * fill fast), read the acknowledgement, and never read again. The stuck phase lasts until the server
 * has closed every one of them as `stalled`; then they read what their sockets held, and leave.
 */
import { performance } from 'node:perf_hooks';
import { type ListenPlan, openMany } from '../client.ts';
import { type ServerProcess, sleep, sum } from '../harness.ts';
import type { MemorySample, Watched } from '../messages.ts';
import { type KernelSockets, kernelSockets, tcpMemory } from './kernel.ts';
import { idBytes, LOAD_URIS, loadUris, stallMs, stuckCount } from './options.ts';
import type { Timeline } from './phases.ts';

export const stuckPlan =
  (offset: number, watch: boolean) =>
  (i: number): ListenPlan => ({
    cycle: offset + i,
    // The long id is in every frame: a stopped reader's socket fills in a few events.
    id: `s${offset + i}-${'x'.repeat(idBytes)}`,
    notifications: { toolsListChanged: true, resourceSubscriptions: loadUris(LOAD_URIS) },
    tasks: false,
    ...(watch ? { headers: { 'x-soak-watch': '1' } } : {}),
  });

export interface Held {
  /** Server memory after GC, every stopped reader still open blocked (some may be closed already). */
  readonly memory: MemorySample;
  /** How many were open when it was taken, and how many of those had their socket full at that instant. */
  readonly count: number;
  readonly blocked: number;
  readonly kernel: KernelSockets;
  readonly tcpMemory: number;
}

export interface StuckOutcome {
  readonly rampMs: number;
  readonly acked: number;
  readonly held: Held | undefined;
  /** Why `held` is missing: the first stall closed a stream before every socket was seen full. */
  readonly heldMissing: string | undefined;
  readonly allClosedMs: number;
  readonly watched: Watched;
  readonly kernelAfterClose: KernelSockets;
  readonly tcpMemoryAfterClose: number;
  /** After they read again: how many saw their connection end, got a terminal result, broke a rule. */
  readonly endedOnResume: number;
  readonly completed: number;
  readonly problems: number;
  readonly bytesAfterAck: number;
}

/**
 * The stuck phase: the stopped readers connect and fill their sockets; the server's memory and kernel
 * sockets once it holds all of them; every one closed by the server; then they read again and leave.
 */
export async function stuckPhase(server: ServerProcess, timeline: Timeline): Promise<StuckOutcome> {
  const t0 = performance.now();
  timeline.segment('connecting, sockets filling');
  const stuck = await openMany(server.port, stuckCount, stuckPlan(0, true), true);
  const rampMs = performance.now() - t0;
  const acked = stuck.filter((listen) => listen.acked).length;
  // Once every stopped reader still open has filled its socket (with a slow ramp the first may be
  // closed already), the server holds them all: its memory then, per stopped reader open at that time.
  let held: Held | undefined;
  let heldMissing: string | undefined;
  const fillDeadline = performance.now() + stallMs * 3 + 30_000;
  for (;;) {
    const { watched } = await server.call('watched');
    if (watched.open > 0 && watched.blockedNow >= watched.open) {
      // The kernel first (a glance), then the server's memory (two full GCs, which take a while).
      const kernel = kernelSockets(server.port);
      const tcp = tcpMemory();
      timeline.segment("the run's own GC (not counted)", false);
      const reply = await server.call('memory');
      timeline.segment('held: every stopped reader still open has filled its socket');
      // Counted when the memory was taken: the stall timeout may have closed some meanwhile.
      held = { memory: reply.memory, count: reply.watchedOpen, blocked: reply.watchedBlocked, kernel, tcpMemory: tcp };
      break;
    }
    if ((watched.open === 0 && watched.closed > 0) || performance.now() > fillDeadline) {
      heldMissing = `${watched.blockedNow} of ${watched.open} open ones blocked, ${watched.closed} closed`;
      break;
    }
    await sleep(50);
  }
  // Then every one closed by the server: by the stall clock, or not at all (the guard, a failed check).
  const closeDeadline = performance.now() + rampMs + stallMs * 3 + 30_000;
  let closing = false;
  for (;;) {
    const { watched } = await server.call('watched');
    if (!closing && watched.closed > 0) {
      closing = true;
      timeline.segment('stall closes');
    }
    if (watched.closed >= acked || performance.now() > closeDeadline) break;
    await sleep(50);
  }
  const allClosedMs = performance.now() - t0;
  timeline.segment('all closed; the stopped readers read again and leave');
  // The server's kernel, before the clients read or close anything: what the closed streams left behind.
  await sleep(200);
  const kernelAfterClose = kernelSockets(server.port);
  const tcpMemoryAfterClose = tcpMemory();
  const { watched } = await server.call('watched', { detail: { from: 0, to: stuckCount } });
  // They read again: what their sockets held, then the end (no terminal result for a stalled stream).
  const bytesAtAck = sum(stuck.map((listen) => listen.bytes));
  for (const listen of stuck) listen.resumeReading();
  await Promise.all(stuck.map((listen) => listen.until(() => listen.ended, 30_000)));
  const endedOnResume = stuck.filter((listen) => listen.ended).length;
  for (const listen of stuck) listen.hangUp();
  await Promise.all(stuck.map((listen) => listen.closed));
  timeline.segment('');
  return {
    rampMs,
    acked,
    held,
    heldMissing,
    allClosedMs,
    watched,
    kernelAfterClose,
    tcpMemoryAfterClose,
    endedOnResume,
    completed: stuck.filter((listen) => listen.completed).length,
    problems: stuck.filter((listen) => listen.problem !== undefined).length,
    bytesAfterAck: sum(stuck.map((listen) => listen.bytes)) - bytesAtAck,
  };
}
