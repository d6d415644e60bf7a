/**
 * The soak (`npm run soak`, tools/soak/) at its `--quick` size, in `npm test`, so that it never rots:
 * a few hundred listen open/close cycles with random disconnects under a steady publish load, then
 * every leak check of the full run (streams, index entries, timers, handles, listeners, connections,
 * closed-exactly-once, heap after GC). The full 20,000-cycle run is `npm run soak`; its figures are in
 * docs/reliability.md.
 */
import { expect, test } from '@jest/globals';
import { runSoak } from '../helpers/soak.ts';

test('npm run soak -- --quick: every check passes', async () => {
  const { code, output } = await runSoak(['--quick']);
  // The whole report on failure: which check, and what it saw.
  expect({ code, output }).toMatchObject({ code: 0 });
  expect(output).toContain('soak: all checks passed');
}, 90_000);
