/** pass-through: tools/list requests/s, the targets alternating round by round. */
import { median } from '../../tools/shared/stats.ts';
import { cpuBetween, hammer, usage } from '../lib/client.ts';
import { toolsListRequest } from '../lib/wire.ts';
import { type Scenario, type ScenarioResult, type Target } from '../scenario.ts';
import { num } from './rows.ts';

type Params = { rounds: number; durationMs: number; concurrency: number };

export const passthrough: Scenario<Params> = {
  name: 'passthrough',
  title: 'pass-through: tools/list requests/s through the host app, with and without the middleware (the SDK build)',
  full: { rounds: 6, durationMs: 2000, concurrency: 8 },
  quick: { rounds: 2, durationMs: 700, concurrency: 8 },
  targets: ['ours', 'sdk'],
  timeoutMs: 180_000,
  rows: () => [
    { label: 'pass-through: tools/list req/s', unit: '/s', key: 'rps', digits: 0, only: ['ours', 'sdk'] },
    {
      label: 'pass-through: server CPU per request',
      unit: 'µs',
      key: 'cpuUsPerRequest',
      digits: 0,
      only: ['ours', 'sdk'],
    },
    {
      label: 'pass-through: overhead of the middleware',
      unit: '%',
      value: (f, all) => (1 - num(f['rps']) / num(all.sdk?.['rps'])) * 100,
      only: ['ours'],
      digits: 1,
      target: '≤ 3%',
      met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 3 : undefined),
    },
  ],
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    const rps: Partial<Record<Target, number[]>> = {};
    const cpu: Partial<Record<Target, number[]>> = {};
    const statuses: Partial<Record<Target, string>> = {};
    const make = (n: number) => {
      const { body, headers } = toolsListRequest(n);
      return { method: 'POST', path: '/mcp', body, headers };
    };
    for (const target of targets) await hammer(ports[target], { durationMs: 300, concurrency: p.concurrency }, make);
    for (let r = 0; r < p.rounds; r++) {
      for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
        const port = ports[target];
        const u0 = await usage(port);
        const run = await hammer(port, { durationMs: p.durationMs, concurrency: p.concurrency }, make);
        const u1 = await usage(port);
        (rps[target] ??= []).push(run.requests / (run.elapsedMs / 1000));
        (cpu[target] ??= []).push(cpuBetween(u0, u1) / Math.max(1, run.requests));
        statuses[target] = JSON.stringify(run.statuses);
      }
    }
    for (const target of targets) {
      result[target] = {
        rps: median(rps[target] ?? []),
        cpuUsPerRequest: median(cpu[target] ?? []),
        statuses: statuses[target] ?? '',
      };
    }
    return result;
  },
};
