/**
 * The stuck run's verdict: the bounds it holds the server to, what it measured against them, the
 * guarantees by name (the JSON report's, which test/system/stuck.test.ts asserts by count) and the
 * checks, any of which failing makes the run exit 1.
 */
import { type Check, leftovers, mib, sum } from '../harness.ts';
import type { MemorySample, Snapshot } from '../messages.ts';
import type { ChurnTally } from './churn.ts';
import { kernelText, kib, signed } from './format.ts';
import type { HealthyResult, WindowFigures } from './healthy.ts';
import { healthyCount, idBytes, LOAD_URIS, stuckCount } from './options.ts';
import type { Phase, Segment } from './phases.ts';
import type { StuckOutcome } from './stopped-readers.ts';

/**
 * How far the server's heap after GC may be above its baseline once the stopped readers are gone (the
 * healthy readers still open, against the same before them), and once every client is gone (against
 * the idle baseline): 2 MiB, and 1 KiB per stopped reader for what is sized by the most streams held
 * at once (the hub's index sets, Node's and this run's maps) or compiled for paths first taken after
 * the baseline (the stall close). Measured: +0.3 MiB with 64, +0.9 to +1.7 MiB with 2,000 to 10,000.
 * A stopped reader kept after its close holds its response, request, socket and id (20 to 80 KB):
 * tried, all 64 of the quick run kept made +2.8 MiB, which the soak's 4 MiB let through.
 */
export const heapBound = (stoppedReaders: number): number => 2 * 1024 * 1024 + 1024 * stoppedReaders;
/**
 * What the server may hold per stopped reader while they are all blocked (heap and external memory
 * after GC, over the same with the healthy readers alone), besides what grows with its listen id: an
 * idle stream costs about 10 KB (docs/performance.md), its queue at most its bound in references, and
 * its socket one refused write, which is at most a tick's batch (16 KiB) and one frame.
 */
const HELD_BASE_BYTES = 48 * 1024;

/**
 * The bound per stopped reader: {@link HELD_BASE_BYTES}, and four frames for what grows with the id (the
 * stream keeps the id, its JSON and the request-index key made of it; the refused write ends with a
 * frame). Before the fix of commit c551730 a refused write held up to 64 queued frames: 16 of them
 * (250 KiB) per stopped reader were measured; a queue or a socket that kept every frame of the stall
 * holds hundreds.
 */
export function heldBound(frameBytes: number): number {
  return HELD_BASE_BYTES + 4 * frameBytes;
}

/** What the run gathered, for the verdict and the report. */
export interface Results {
  readonly baseline: Snapshot;
  readonly end: Snapshot;
  readonly healthy: HealthyResult;
  readonly published: number;
  readonly outcome: StuckOutcome;
  readonly churned: ChurnTally;
  readonly exitCode: number | null | 'still running';
  readonly totalMs: number;
  /** baseline, stuck, after, churn. */
  readonly phases: readonly Phase[];
  readonly segments: readonly Segment[];
  /** The kernel's TCP memory, machine-wide, at its peak over the run. */
  readonly tcpMemOverall: number;
}

export const heapOf = (m: MemorySample | undefined): number => m?.heapUsed ?? Number.NaN;
export const heldOf = (m: MemorySample | undefined): number => (m === undefined ? Number.NaN : m.heapUsed + m.external);
/** The healthy readers' figures of phase `p`. */
export const healthyOf = (r: Results, p: Phase): WindowFigures | undefined =>
  r.healthy.phases.find((figures) => figures.name === p.name);

/** What the checks and the report read, derived once from the results. */
export interface Measures {
  /** A stopped reader's frame: its id and the rest. */
  readonly frameBytes: number;
  /** Stopped readers closed as `stalled`, per stream. */
  readonly stalled: number;
  /** Per stopped reader: from the start of its socket's last block (as polled) to its close, in ms. */
  readonly blockToClose: readonly number[];
  /** Stopped readers closed with no block seen before. */
  readonly closedUnblocked: number;
  readonly firstBlock: number;
  readonly lastClose: number;
  readonly heldPerReader: number;
  readonly heldBound: number;
  readonly queueBound: number;
  readonly maxOverBound: number;
  /** Heap after GC after the stopped readers, against before them; at the end, against the baseline. */
  readonly afterDelta: number;
  readonly endDelta: number;
}

export function measure(r: Results): Measures {
  const [a, , c] = r.phases as [Phase, Phase, Phase, Phase];
  const { outcome } = r;
  const { watched } = outcome;
  const frameBytes = idBytes + 160;
  const reasons = watched.reasons ?? [];
  const stalled = reasons.filter((reason) => reason === 'stalled').length;
  const blockToClose: number[] = [];
  let closedUnblocked = 0;
  for (let i = 0; i < stuckCount; i++) {
    const last = watched.lastBlockedAt?.[i] ?? 0;
    const closedAt = watched.closedAt?.[i] ?? 0;
    if (closedAt === 0) continue;
    if (last === 0 || last > closedAt) closedUnblocked++;
    else blockToClose.push(closedAt - last);
  }
  const firstBlock = Math.min(...(watched.firstBlockedAt ?? []).filter((t) => t > 0));
  const lastClose = Math.max(...(watched.closedAt ?? []).filter((t) => t > 0));
  const heldPerReader =
    outcome.held === undefined ? Number.NaN : (heldOf(outcome.held.memory) - heldOf(a.memory)) / outcome.held.count;
  const bound = heldBound(frameBytes);
  const queueBound = 1 + LOAD_URIS;
  const maxOverBound = Math.max(...r.phases.map((p) => p.sample?.maxOverBound ?? 0));
  const afterDelta = heapOf(c.memory) - heapOf(a.memory);
  const endDelta = r.end.heapUsed - r.baseline.heapUsed;
  return {
    frameBytes,
    stalled,
    blockToClose,
    closedUnblocked,
    firstBlock,
    lastClose,
    heldPerReader,
    heldBound: bound,
    queueBound,
    maxOverBound,
    afterDelta,
    endDelta,
  };
}

/** The guarantees by name, and the checks. */
export function judge(r: Results, m: Measures): { guarantees: Record<string, unknown>; checks: Check[] } {
  const [a, b, c] = r.phases as [Phase, Phase, Phase, Phase];
  const { phases } = r;
  const { outcome } = r;
  const { watched } = outcome;
  const { lost, repeated } = r.healthy;
  const { stalled, closedUnblocked, heldPerReader, maxOverBound, queueBound, afterDelta, endDelta } = m;
  const bound = m.heldBound;

  const endLeftovers = leftovers('end', r.baseline, r.end, false);
  // What the guarantees rest on, by name, for a test to assert (test/stuck.test.ts): counts, not times.
  const guarantees = {
    stuckReaders: stuckCount,
    stuckAcked: outcome.acked,
    stalledPerStream: stalled,
    stalledInStats: b.closed['stalled'] ?? 0,
    stalledOutsideTheStuckPhase: sum(phases.filter((p) => p !== b).map((p) => p.closed['stalled'] ?? 0)),
    closedWithoutBlockSeen: closedUnblocked,
    stuckEndedOnResume: outcome.endedOnResume,
    terminalResultsToStuck: outcome.completed,
    malformedToStuck: outcome.problems,
    maxQueuedPastBound: maxOverBound,
    heldPerReaderBytes: Number.isFinite(heldPerReader) ? Math.round(heldPerReader) : null,
    heldBoundBytes: bound,
    serverSocketsLeftAfterStall: outcome.kernelAfterClose.total - healthyCount,
    healthyReaders: healthyCount,
    healthyAcked: r.healthy.acked,
    healthyOpenAtEnd: r.healthy.stillOpen,
    healthyMalformed: r.healthy.problems,
    numberedEvents: r.published,
    healthyLost: lost,
    healthyRepeated: repeated,
    churnCycles: r.churned.finished,
    churnFailed: r.churned.failed,
    heapAfterVsBeforeBytes: afterDelta,
    heapEndVsBaselineBytes: endDelta,
    heapBoundBytes: heapBound(stuckCount),
    leftoversFailed: endLeftovers.filter((check) => !check.ok).map((check) => check.name),
    serverExitCode: r.exitCode,
  };

  const checks: Check[] = [
    {
      name: 'healthy readers acknowledged, and open until the end',
      observed: `${r.healthy.acked} acknowledged, ${r.healthy.stillOpen} open at the end, of ${healthyCount}`,
      expected: 'all',
      ok: r.healthy.acked === healthyCount && r.healthy.stillOpen === healthyCount,
    },
    {
      name: 'healthy readers: numbered events lost, repeated or out of order; malformed messages',
      observed:
        `${lost} lost, ${repeated} repeated/out of order (${r.published} events × ${healthyCount} readers); ` +
        `${r.healthy.problems} malformed`,
      expected: '0',
      ok: lost === 0 && repeated === 0 && r.healthy.caughtUp && r.healthy.problems === 0,
    },
    {
      name: 'stopped readers acknowledged',
      observed: `${outcome.acked} of ${stuckCount}`,
      expected: 'all',
      ok: outcome.acked === stuckCount,
    },
    {
      name: 'stopped readers closed by the server as stalled (per stream, and stats)',
      observed: `${stalled} stalled of ${stuckCount}; ${watched.closed} closed in all; stats ${b.closed['stalled'] ?? 0}`,
      expected: `${stuckCount} = ${stuckCount} = ${stuckCount}`,
      ok: stalled === stuckCount && watched.closed === stuckCount && b.closed['stalled'] === stuckCount,
    },
    {
      name: 'no stream closed as stalled outside the stuck phase',
      observed: phases.map((p) => `${p.name} ${p.closed['stalled'] ?? 0}`).join(', '),
      expected: `stuck only`,
      ok: phases.every((p) => p === b || (p.closed['stalled'] ?? 0) === 0),
    },
    {
      name: 'a stopped reader is closed only after its socket was seen full',
      observed: `${closedUnblocked} closed without a block seen before`,
      expected: '0',
      ok: closedUnblocked === 0,
    },
    {
      name: 'stopped readers on reading again: the end, no terminal result, nothing malformed',
      observed: `${outcome.endedOnResume} ended, ${outcome.completed} results, ${outcome.problems} malformed`,
      expected: `${stuckCount}, 0, 0`,
      ok: outcome.endedOnResume === stuckCount && outcome.completed === 0 && outcome.problems === 0,
    },
    {
      name: 'queue per stream, over every sample: past its own bound (the keys it follows)',
      observed: `at most ${maxOverBound} past it (stopped readers: up to ${Math.max(...phases.map((p) => p.sample?.maxQueued ?? 0))} queued, bound ${queueBound})`,
      expected: '≤ 0',
      ok: maxOverBound <= 0,
    },
    {
      name: 'server memory per stopped reader while all are held (heap + external after GC, over baseline)',
      observed: outcome.held === undefined ? `not measured: ${outcome.heldMissing ?? ''}` : kib(heldPerReader),
      expected: `≤ ${kib(bound)}`,
      ok: outcome.held !== undefined && heldPerReader <= bound,
    },
    {
      name: "stalled connections the server's kernel still holds (all closed, before the clients read)",
      observed: kernelText({
        ...outcome.kernelAfterClose,
        total: outcome.kernelAfterClose.total - healthyCount,
      }),
      expected: `none beyond the ${healthyCount} healthy`,
      ok:
        outcome.kernelAfterClose.total === healthyCount &&
        (outcome.kernelAfterClose.byState['established'] ?? 0) === healthyCount,
    },
    {
      name: 'churn cycles that failed (no ack, refused, closed by the server, malformed)',
      observed: `${r.churned.failed} of ${r.churned.finished}`,
      expected: '0',
      ok: r.churned.failed === 0 && r.churned.finished === r.churned.started,
    },
    {
      name: `heap after GC once the stopped readers are gone, vs before them (${mib(heapOf(a.memory))})`,
      observed: `${signed(afterDelta)} (${mib(heapOf(c.memory))})`,
      expected: `≤ +${mib(heapBound(stuckCount))}`,
      ok: afterDelta <= heapBound(stuckCount),
    },
    ...endLeftovers,
    {
      name: `end: heap after GC vs baseline (${mib(r.baseline.heapUsed)})`,
      observed: `${signed(endDelta)} (${mib(r.end.heapUsed)})`,
      expected: `≤ +${mib(heapBound(stuckCount))}`,
      ok: endDelta <= heapBound(stuckCount),
    },
    {
      name: 'server process exits by itself once closed',
      observed: r.exitCode === 'still running' ? 'still running after 5 s' : `exit code ${r.exitCode}`,
      expected: 'exit code 0',
      ok: r.exitCode === 0,
    },
  ];
  return { guarantees, checks };
}
