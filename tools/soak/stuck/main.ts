/**
 * `npm run soak -- --stuck [--quick] [--stuck-readers=2000] [--healthy=200] [--rate=200] [--load-rate=100]
 * [--stall-ms=30000] [--id-bytes=16384] [--phase-ms=10000] [--churn-ms=15000] [--churn-rate=200] [--seed=1]
 * [--netns=auto|yes|no] [--sndbuf-kib=64] [--rcvbuf-kib=32] [--tcp-mem-limit-mib=N] [--json=FILE]`:
 * issue #14's stopped readers at scale, and load figures under faults, for the Express middleware.
 *
 * The server runs in a process of its own (server.ts in `stuck` mode), as in the soak: what it reports
 * (heap, timers, handles, queues) is its own, and its event loop is not shared with the clients. Its
 * publisher sends `--rate` numbered task events a second to `--healthy` readers, which read everything
 * and check that every event arrives, once and in order (each carries its number and publish time, so
 * the delivery latency is measured per event), and `--load-rate` other events a second (tool list
 * changes, updates of 32 URIs) to every other stream. The healthy readers run in a process of their own
 * too (healthy.ts: this one, which holds the stopped readers, stalls). One run, in phases, side by side:
 *
 * - **baseline**: the healthy readers alone;
 * - **stuck**: `--stuck-readers` more clients, each on a TCP connection of its own, open a listen for
 *   the load events with a `--id-bytes` id (it rides in every frame, so their sockets fill fast), read
 *   the acknowledgement, and never read again; the phase lasts until the server has closed every one
 *   of them as `stalled` (`stallTimeoutMs` is `--stall-ms`); then they read what their sockets held;
 * - **after**: the healthy readers alone again;
 * - **churn**: clients connect and disconnect at `--churn-rate` a second (a fifth leave before the
 *   acknowledgement, three fifths read for 10 to 300 ms, a fifth stop reading and leave 100 to 300 ms
 *   later) while the healthy readers are measured.
 *
 * Reported per phase: healthy delivery latency (p50, p99, max), events and deliveries per second, the
 * server's heap after GC, peak heap and RSS, event-loop delays (server and driver), the kernel's TCP
 * memory; for the stopped readers: the server's memory and the kernel's send queues while all of them
 * are held, the largest queue of one stream against its bound, and the time from a socket's last block
 * to its stream's close against `stallTimeoutMs`. Exit 1 when a guarantee breaks: a stopped reader not
 * closed as `stalled` (every one, exactly once), a stream's queue past its bound, memory per stopped
 * reader past {@link heldBound}, a stalled stream's connection still held by the server's kernel,
 * a healthy event lost, repeated or out of order, a churn cycle that failed, memory not back near its
 * baseline, or anything the soak's leftover checks find (streams, index entries, timers, handles,
 * listeners, connections, closed-exactly-once). `--quick` (64 stopped readers, 16 healthy) takes a
 * few seconds; `npm test` runs it.
 *
 * Thousands of stopped sockets hold kernel memory: on this machine's loopback a stopped reader's
 * connection buffers about 4 MiB (its 64 KiB MTU sizes the send buffer), and every process's TCP shares
 * one kernel limit (`net.ipv4.tcp_mem`). So on Linux the run enters a network namespace of its own
 * (`unshare --net`, as root or with a user namespace) whose loopback caps each socket's send and
 * receive buffers (`--sndbuf-kib`, `--rcvbuf-kib`: `net.ipv4.tcp_wmem` and `tcp_rmem` are per
 * namespace); `--netns=no` stays in the machine's namespace. Either way a guard samples the kernel's TCP
 * memory, which is machine-wide, and stops the run (exit 2) before it passes `--tcp-mem-limit-mib`
 * (default: half the kernel's `tcp_mem` low mark), so that no other process is pushed into TCP memory
 * pressure.
 *
 * This folder, a file a job: options.ts (the flags), namespace.ts and kernel.ts (the namespace, the
 * kernel's figures and the guard), healthy.ts and healthy-process.ts (the healthy readers' process and
 * its driver), stopped-readers.ts, churn.ts, phases.ts (the timeline), checks.ts (bounds, guarantees,
 * checks), report.ts and format.ts (what is printed), and this file, which runs the phases in order.
 */
import { performance } from 'node:perf_hooks';
import { openMany } from '../client.ts';
import { ServerProcess, sleep } from '../harness.ts';
import { judge, measure } from './checks.ts';
import { churn } from './churn.ts';
import { healthyPlan, type Window } from './healthy.ts';
import { HealthyProcess } from './healthy-process.ts';
import { TcpMemoryGuard } from './kernel.ts';
import { inNamespace, setUpNamespace } from './namespace.ts';
import {
  churnRate,
  healthyCount,
  IN_NAMESPACE,
  phaseMs,
  rcvbufKib,
  serverConfig,
  sndbufKib,
  stallMs,
  stuckCount,
  WARMUP_HEALTHY,
  WARMUP_STUCK,
} from './options.ts';
import { Timeline } from './phases.ts';
import { report } from './report.ts';
import { stuckPhase, stuckPlan } from './stopped-readers.ts';

async function run(): Promise<number> {
  const unready = IN_NAMESPACE ? setUpNamespace() : undefined;
  if (unready !== undefined) {
    console.error(`soak: ${unready}`);
    return 2;
  }
  const server = await ServerProcess.start(serverConfig);
  const guard = new TcpMemoryGuard(server);
  const inNs = IN_NAMESPACE
    ? `own network namespace, socket buffers ≤ ${sndbufKib}/${rcvbufKib} KiB`
    : 'machine namespace';
  process.stderr.write(
    `soak --stuck: ${stuckCount} stopped readers, ${healthyCount} healthy, ${serverConfig.publishRate} numbered ` +
      `events/s + ${serverConfig.loadRate} load events/s, stallTimeoutMs ${stallMs}, ${inNs}\n`,
  );
  const started = performance.now();

  // Warm-up: every path once (the numbered events, a stopped reader's socket filling, churn), so that
  // the baseline has the compiled code and the pools; then every client leaves.
  const warmHealthy = await openMany(server.port, WARMUP_HEALTHY, healthyPlan(stuckCount));
  const warmStuck = await openMany(server.port, WARMUP_STUCK, stuckPlan(stuckCount + WARMUP_HEALTHY, false), true);
  await server.call('publisher', { run: true, resetSeq: true });
  await sleep(500);
  await server.call('publisher', { run: false, resetSeq: false });
  for (const listen of [...warmHealthy, ...warmStuck]) listen.hangUp();
  await Promise.all([...warmHealthy, ...warmStuck].map((listen) => listen.closed));
  const baseline = (await server.call('measure', { label: 'baseline', resumePublisher: false })).snapshot;

  // The healthy readers, in their own process, then the numbered events from 0.
  const healthy = await HealthyProcess.start({
    port: server.port,
    count: healthyCount,
    firstCycle: stuckCount + WARMUP_STUCK + WARMUP_HEALTHY,
  });
  const timeline = new Timeline(server, guard, healthy, (await server.call('sample')).sample);
  await server.call('publisher', { run: true, resetSeq: true });

  process.stderr.write('soak --stuck: baseline\n');
  timeline.begin('baseline');
  await sleep(phaseMs);
  await timeline.end();

  process.stderr.write(`soak --stuck: ${stuckCount} stopped readers\n`);
  timeline.begin('stuck');
  const outcome = await stuckPhase(server, timeline);
  await timeline.end();

  process.stderr.write('soak --stuck: after\n');
  timeline.begin('after');
  await sleep(phaseMs);
  await timeline.end();

  process.stderr.write(`soak --stuck: churn at ${churnRate}/s\n`);
  timeline.begin('churn');
  const churned = await churn(server.port, stuckCount + WARMUP_STUCK + WARMUP_HEALTHY + healthyCount);
  await timeline.end();

  // The last numbered event reaches every healthy reader, or it was lost; then they leave.
  const { published } = await server.call('publisher', { run: false, resetSeq: false });
  const windows = (list: readonly { name: string; start: number; end: number; counted?: boolean }[]): Window[] =>
    list.map(({ name, start, end, counted }) => ({ name, start, end, counted: counted ?? true }));
  const healthyResult = await healthy.finish(published, windows(timeline.phases), windows(timeline.segments));
  const end = (await server.call('measure', { label: 'end', resumePublisher: false })).snapshot;
  await server.call('exit');
  const exitCode = await Promise.race([server.exited, sleep(5000).then(() => 'still running' as const)]);
  if (exitCode === 'still running') server.child.kill('SIGKILL');
  guard.stop();
  const totalMs = performance.now() - started;

  const results = {
    baseline,
    end,
    healthy: healthyResult,
    published,
    outcome,
    churned,
    exitCode,
    totalMs,
    phases: timeline.phases,
    segments: timeline.segments,
    tcpMemOverall: guard.overall,
  };
  const measures = measure(results);
  const { guarantees, checks } = judge(results, measures);
  report(results, measures, guarantees, checks);
  return checks.every((check) => check.ok) ? 0 : 1;
}

/** The run: in a network namespace of its own when one can be made (see the top of this file). */
export async function main(): Promise<number> {
  const code = await inNamespace();
  return code ?? run();
}
