/** idle memory: N open streams, heap and RSS per stream after GC. */
import { closeAll, openMany, sleep, usage } from '../lib/client.ts';
import { type Filter, noteUri } from '../lib/wire.ts';
import { type Scenario, type ScenarioResult, WITH_FRAMEWORK } from '../scenario.ts';
import { atMost, fastifyRows, frameworkRow } from './rows.ts';

type Params = { streams: number; warmup: number };

export const idle: Scenario<Params> = {
  name: 'idle',
  title: 'idle memory: open streams (toolsListChanged + 10 URIs each), heap and RSS per stream after GC',
  full: { streams: 2000, warmup: 50 },
  quick: { streams: 500, warmup: 20 },
  targets: WITH_FRAMEWORK,
  timeoutMs: 180_000,
  rows: (p) => [
    {
      label: `idle: heap per open stream (${p.streams} open)`,
      unit: 'KB',
      key: 'heapKbPerStream',
      digits: 2,
      target: '≤ 1.0× ceiling',
      met: atMost(1.0),
    },
    frameworkRow('idle: heap per open stream, against the ceiling in Express', 'KB', 'heapKbPerStream', 2),
    ...fastifyRows('idle: heap per open stream', 'KB', 'heapKbPerStream', 2, 1.0),
    { label: 'idle: external memory per open stream', unit: 'KB', key: 'externalKbPerStream', digits: 2 },
    { label: 'idle: RSS per open stream', unit: 'KB', key: 'rssKbPerStream', digits: 1 },
  ],
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    // Ten URIs each, as the issue states the target (stream i holds URIs 10i…10i+9, none shared).
    const filter = (i: number): Filter => ({
      toolsListChanged: true,
      resourceSubscriptions: Array.from({ length: 10 }, (_, k) => noteUri(10 * i + k)),
    });
    for (const target of targets) {
      const port = ports[target];
      // Warm the code paths (lazy modules, JIT) so they are not counted as per-stream memory.
      closeAll(await openMany(port, p.warmup, filter, { from: 100_000 }));
      await sleep(500);
      const m0 = await usage(port, true);
      const readers = await openMany(port, p.streams, filter);
      await sleep(500);
      const m1 = await usage(port, true);
      closeAll(readers);
      result[target] = {
        heapKbPerStream: (m1.mem.heapUsed - m0.mem.heapUsed) / p.streams / 1024,
        externalKbPerStream: (m1.mem.external - m0.mem.external) / p.streams / 1024,
        rssKbPerStream: (m1.mem.rss - m0.mem.rss) / p.streams / 1024,
        counted: m1.streams - m0.streams,
      };
      await sleep(500);
    }
    return result;
  },
};
