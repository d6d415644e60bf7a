/** disconnect: N idle clients hang up at once; open streams the server counts afterwards. */
import { now } from '../../tools/shared/clock.ts';
import { closeAll, openMany, sleep, usage } from '../lib/client.ts';
import { type Figures, type RowSpec, type Scenario, type ScenarioResult, TARGETS } from '../scenario.ts';

type Params = { streams: number; checksMs: number[] };

export const disconnect: Scenario<Params> = {
  name: 'disconnect',
  title: 'disconnect: idle clients hang up at once; streams the server still counts afterwards',
  full: { streams: 1000, checksMs: [1000, 5000] },
  quick: { streams: 300, checksMs: [1000, 2000] },
  targets: TARGETS,
  timeoutMs: 120_000,
  rows: (p) => {
    const checks = p.checksMs;
    return checks.map((at, i): RowSpec => ({
      label: `disconnect: of ${p.streams} hung up, still counted after ${at / 1000} s`,
      unit: '',
      key: `openAfter${at}`,
      digits: 0,
      ...(i === 0 ? { target: '0', met: (v) => (typeof v.ours === 'number' ? v.ours === 0 : undefined) } : {}),
    }));
  },
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    for (const target of targets) {
      const port = ports[target];
      const readers = await openMany(port, p.streams, () => ({ toolsListChanged: true }));
      await sleep(300);
      const u0 = await usage(port);
      const t0 = now();
      closeAll(readers);
      const figures: Figures = { openBefore: u0.streams };
      for (const at of p.checksMs) {
        await sleep(Math.max(0, t0 + at - now()));
        figures[`openAfter${at}`] = (await usage(port)).streams - (u0.streams - p.streams);
      }
      result[target] = figures;
    }
    return result;
  },
};
