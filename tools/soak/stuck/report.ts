/**
 * The stuck run's report: a table of figures per phase, the run's figures, the checks, and with
 * `--json=FILE` all of it (and the guarantees by name) as JSON.
 */
import { writeFileSync } from 'node:fs';
import { percentile } from '../../shared/stats.ts';
import { cell, type Check, mib, table } from '../harness.ts';
import { WATCH_POLL_MS } from '../messages.ts';
import { healthyOf, heapOf, heldOf, type Measures, type Results } from './checks.ts';
import { kernelText, kib, ms, perSecond, signed } from './format.ts';
import { SEQ_KEYS } from './healthy.ts';
import { tcpMemLimit } from './kernel.ts';
import {
  churnMs,
  churnRate,
  flags,
  healthyCount,
  idBytes,
  IN_NAMESPACE,
  LOAD_URIS,
  phaseMs,
  rcvbufKib,
  seed,
  serverConfig,
  sndbufKib,
  stallMs,
  stuckCount,
} from './options.ts';
import type { Phase } from './phases.ts';

/** Prints the report (and writes the JSON one with `--json`). */
export function report(r: Results, m: Measures, guarantees: Record<string, unknown>, checks: readonly Check[]): void {
  const { phases, segments, outcome } = r;
  const [a] = phases as [Phase, Phase, Phase, Phase];
  const { watched } = outcome;
  const { frameBytes, heldPerReader, queueBound, blockToClose, firstBlock, lastClose } = m;

  const column = (f: (p: Phase) => string): string[] => phases.map(f);
  const byPhase: string[][] = [
    ['figure', ...phases.map((p) => p.name)],
    ['duration', ...column((p) => `${((p.end - p.start) / 1000).toFixed(1)} s`)],
    [
      `numbered events/s (target ${serverConfig.publishRate})`,
      ...column((p) => perSecond(healthyOf(r, p)?.events ?? Number.NaN, p.end - p.start)),
    ],
    [
      'deliveries/s to the healthy readers',
      ...column((p) => perSecond(healthyOf(r, p)?.deliveries ?? Number.NaN, p.end - p.start)),
    ],
    ['healthy delivery latency p50', ...column((p) => ms(healthyOf(r, p)?.p50Ms ?? Number.NaN, 2))],
    ['healthy delivery latency p99', ...column((p) => ms(healthyOf(r, p)?.p99Ms ?? Number.NaN, 2))],
    ['healthy delivery latency max', ...column((p) => ms(healthyOf(r, p)?.maxMs ?? Number.NaN, 1))],
    ['most events queued by one healthy stream', ...column((p) => String(p.sample?.maxQueuedHealthy ?? 'n/a'))],
    ['streams open at most', ...column((p) => String(p.sample?.maxOpen ?? 'n/a'))],
    [
      'streams opened / closed (by reason)',
      ...column(
        (p) =>
          `${p.opened} / ${
            Object.entries(p.closed)
              .map(([k, n]) => `${k} ${n}`)
              .join(', ') || '0'
          }`,
      ),
    ],
    ['most events queued, all streams', ...column((p) => String(p.sample?.maxTotalQueued ?? 'n/a'))],
    ['server heap after GC, phase end', ...column((p) => mib(heapOf(p.memory)))],
    ['server heap + external after GC, phase end', ...column((p) => mib(heldOf(p.memory)))],
    [
      'server peak heap / RSS (sampled, garbage included)',
      ...column((p) => {
        const mem = p.sample?.memory ?? [];
        return `${mib(Math.max(...mem.map((m) => m.heapUsed)))} / ${mib(Math.max(...mem.map((m) => m.rss)))}`;
      }),
    ],
    [
      'server event-loop delay p99 / max',
      ...column((p) => `${ms(p.sample?.loopDelayP99Ms ?? Number.NaN)} / ${ms(p.sample?.loopDelayMaxMs ?? Number.NaN)}`),
    ],
    [
      "healthy readers' client: event-loop delay p99 / max",
      ...column((p) => {
        const delay = r.healthy.loopDelay[p.name];
        return `${ms(delay?.p99Ms ?? Number.NaN)} / ${ms(delay?.maxMs ?? Number.NaN)}`;
      }),
    ],
    [
      "stopped readers' and churners' client: event-loop delay p99 / max",
      ...column((p) => `${ms(p.driverDelayP99Ms)} / ${ms(p.driverDelayMaxMs)}`),
    ],
    ['kernel TCP memory, machine-wide, peak', ...column((p) => mib(p.tcpMemPeak))],
  ];

  const figures: [string, string][] = [
    [
      'run',
      `${(r.totalMs / 1000).toFixed(1)} s; ${IN_NAMESPACE ? `own network namespace, socket buffers ≤ ${sndbufKib} KiB send / ${rcvbufKib} KiB receive` : "the machine's network namespace, its socket buffers"}`,
    ],
    [
      'stopped readers',
      `${stuckCount}, each following the tool list and ${LOAD_URIS} URIs (queue bound ${queueBound}), ${kib(frameBytes)} frames (${idBytes}-byte id)`,
    ],
    [
      'healthy readers',
      `${healthyCount}, each following ${SEQ_KEYS} task ids: ${r.published} numbered events each, ${r.published * healthyCount} deliveries`,
    ],
    ['stopped readers connected and acknowledged', `${outcome.acked} in ${(outcome.rampMs / 1000).toFixed(1)} s`],
    [
      `held: ${outcome.held?.count ?? 0} stopped readers open (${outcome.held?.blocked ?? 0} full at that instant), server after GC`,
      outcome.held === undefined
        ? `not measured: ${outcome.heldMissing ?? ''}`
        : `heap ${signed(heapOf(outcome.held.memory) - heapOf(a.memory))}, heap + external ${signed(heldOf(outcome.held.memory) - heldOf(a.memory))} (${kib(heldPerReader)} per stopped reader), RSS ${signed(outcome.held.memory.rss - (a.memory?.rss ?? 0))}`,
    ],
    [
      "held: the server's kernel sockets",
      outcome.held === undefined
        ? 'n/a'
        : `${kernelText(outcome.held.kernel)} (${kib(outcome.held.kernel.sendQueued / Math.max(1, outcome.acked))} per stopped reader); TCP memory machine-wide ${mib(outcome.held.tcpMemory)}`,
    ],
    [
      'stall closes: first block seen → last stream closed',
      `${((lastClose - firstBlock) / 1000).toFixed(2)} s (stallTimeoutMs ${stallMs} ms; the connections took ${(outcome.rampMs / 1000).toFixed(1)} s)`,
    ],
    [
      'per stopped reader: last block seen → closed as stalled',
      `p50 ${ms(percentile(blockToClose, 50), 0)}, p99 ${ms(percentile(blockToClose, 99), 0)}, min ${ms(percentile(blockToClose, 0), 0)}, max ${ms(percentile(blockToClose, 100), 0)} (the server polls every ${WATCH_POLL_MS} ms)`,
    ],
    ['all stopped readers closed', `${(outcome.allClosedMs / 1000).toFixed(1)} s after the first connected`],
    ...segments.map((part, i): [string, string] => {
      const figures = r.healthy.segments[i];
      return [
        `stuck phase, healthy latency: ${part.name}`,
        `${((part.end - part.start) / 1000).toFixed(1)} s: p50 ${ms(figures?.p50Ms ?? Number.NaN, 2)}, ` +
          `p99 ${ms(figures?.p99Ms ?? Number.NaN, 2)}, max ${ms(figures?.maxMs ?? Number.NaN)}`,
      ];
    }),
    [
      "after the closes: the server's kernel sockets (healthy included)",
      `${kernelText(outcome.kernelAfterClose)}; TCP memory machine-wide ${mib(outcome.tcpMemoryAfterClose)}`,
    ],
    ['stopped readers reading again', `${mib(outcome.bytesAfterAck)} read after the acknowledgement, in all`],
    [
      'churn',
      `${r.churned.started} cycles in ${(r.churned.elapsedMs / 1000).toFixed(1)} s (${perSecond(r.churned.started, r.churned.elapsedMs)}/s, target ${churnRate}/s): ${Object.entries(
        r.churned.byKind,
      )
        .map(([k, n]) => `${k} ${n}`)
        .join(', ')}`,
    ],
    ['kernel TCP memory, machine-wide, peak', `${mib(r.tcpMemOverall)} (guard ${mib(tcpMemLimit)})`],
  ];

  const ok = checks.every((check) => check.ok);
  console.log(`\nStopped readers at scale and load under faults (seed ${seed})\n`);
  console.log(table(byPhase));
  console.log(`\n${table([['figure', 'value'], ...figures])}\n`);
  console.log(
    table([
      ['check', 'observed', 'expected', ''],
      ...checks.map((check) => [check.name, cell(check.observed, 110), check.expected, check.ok ? 'ok' : 'FAILED']),
    ]),
  );
  if (r.churned.failures.length > 0) console.log(`\nfailed churn cycles:\n  ${r.churned.failures.join('\n  ')}`);
  console.log(
    ok ? '\nsoak --stuck: all checks passed' : `\nsoak --stuck: ${checks.filter((c) => !c.ok).length} check(s) FAILED`,
  );
  if (flags.json !== undefined) {
    writeFileSync(
      flags.json,
      `${JSON.stringify(
        {
          guarantees,
          config: {
            ...serverConfig,
            stuckCount,
            healthyCount,
            idBytes,
            phaseMs,
            churnMs,
            churnRate,
            seed,
            namespace: IN_NAMESPACE,
            sndbufKib,
            rcvbufKib,
          },
          phases: phases.map((p) => ({ ...p, healthy: healthyOf(r, p) })),
          segments: segments.map((part, i) => ({ ...part, healthy: r.healthy.segments[i] })),
          healthyLoopDelay: r.healthy.loopDelay,
          stuck: {
            ...outcome,
            watched: {
              ...watched,
              firstBlockedAt: undefined,
              lastBlockedAt: undefined,
              closedAt: undefined,
              reasons: undefined,
            },
          },
          blockToCloseMs: {
            p50: percentile(blockToClose, 50),
            p99: percentile(blockToClose, 99),
            max: percentile(blockToClose, 100),
          },
          churn: r.churned,
          figures: Object.fromEntries(figures),
          checks,
          snapshots: [r.baseline, r.end],
        },
        null,
        2,
      )}\n`,
    );
  }
}
