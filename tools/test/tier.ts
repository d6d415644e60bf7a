// `npm run test:unit|test:integration|test:system [-- jest args]` and `npm test`'s jest step: jest on the
// named tiers (jest projects, see jest.config.js). The caller's arguments go BEFORE --selectProjects,
// because that option takes every word after it as a project name: `npm run test:unit -- test/unit/x.test.ts`
// would otherwise ask for a project called `test/unit/x.test.ts` and run the whole tier.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const separator = process.argv.indexOf('--');
const tiers: string[] = process.argv.slice(2, separator < 0 ? undefined : separator);
const args = separator < 0 ? [] : process.argv.slice(separator + 1);
const jest = fileURLToPath(new URL('../../node_modules/jest/bin/jest.js', import.meta.url));
const run = spawnSync(
  process.execPath,
  ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', jest, ...args, '--selectProjects', ...tiers],
  { stdio: 'inherit' },
);
process.exit(run.status ?? 1);
