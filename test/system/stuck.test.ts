/**
 * The soak's stopped-readers run (`npm run soak -- --stuck`, tools/soak/stuck.ts) at its `--quick` size,
 * in `npm test`, so that it never rots: 64 clients on real TCP connections that read their
 * acknowledgement and nothing more, 16 that read every numbered event, then churn, against the Express
 * middleware in a server process of its own. What is asserted are the run's guarantees, by count,
 * from its JSON report: never a time. The full size (2,000 stopped readers) and its figures are in
 * docs/reliability.md.
 */
import { expect, test } from '@jest/globals';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runSoak } from '../helpers/soak.ts';

test('npm run soak -- --stuck --quick: every stopped reader is closed as stalled, memory stays bounded, no healthy event is lost', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'soak-stuck-'));
  const report = path.join(dir, 'report.json');
  try {
    const { code, output } = await runSoak(['--stuck', '--quick', `--json=${report}`]);
    // The whole report on failure: which check, and what it saw.
    expect({ code, output }).toMatchObject({ code: 0 });
    expect(output).toContain('soak --stuck: all checks passed');

    const { guarantees: g } = JSON.parse(readFileSync(report, 'utf8')) as {
      guarantees: Record<string, number | string[] | null>;
    };
    // Every stopped reader closed by the stall timeout, exactly once, after its socket filled, and
    // only those; none got a terminal result.
    expect(g['stuckReaders']).toBe(64);
    expect(g['stuckAcked']).toBe(64);
    expect(g['stalledPerStream']).toBe(64);
    expect(g['stalledInStats']).toBe(64);
    expect(g['stalledOutsideTheStuckPhase']).toBe(0);
    expect(g['closedWithoutBlockSeen']).toBe(0);
    expect(g['stuckEndedOnResume']).toBe(64);
    expect(g['terminalResultsToStuck']).toBe(0);
    expect(g['malformedToStuck']).toBe(0);
    // Bounded memory: no queue past its bound, the server's memory per stopped reader within its
    // bound, no stalled connection left in the server's kernel, the heap back near its baseline.
    expect(g['maxQueuedPastBound']).toBeLessThanOrEqual(0);
    expect(g['heldPerReaderBytes']).not.toBeNull();
    expect(g['heldPerReaderBytes']).toBeLessThanOrEqual(g['heldBoundBytes'] as number);
    expect(g['serverSocketsLeftAfterStall']).toBe(0);
    expect(g['heapAfterVsBeforeBytes']).toBeLessThanOrEqual(g['heapBoundBytes'] as number);
    expect(g['heapEndVsBaselineBytes']).toBeLessThanOrEqual(g['heapBoundBytes'] as number);
    expect(g['leftoversFailed']).toStrictEqual([]);
    // The healthy readers: every numbered event, once, in order, and all of them open to the end.
    expect(g['healthyAcked']).toBe(16);
    expect(g['healthyOpenAtEnd']).toBe(16);
    expect(g['numberedEvents']).toBeGreaterThan(0);
    expect(g['healthyLost']).toBe(0);
    expect(g['healthyRepeated']).toBe(0);
    expect(g['healthyMalformed']).toBe(0);
    // Churn: clients came and went, and every cycle ended as its client meant.
    expect(g['churnCycles']).toBeGreaterThan(0);
    expect(g['churnFailed']).toBe(0);
    expect(g['serverExitCode']).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
