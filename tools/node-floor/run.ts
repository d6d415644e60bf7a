/**
 * `npm run test:floor`: the jest suite on the lowest Node.js the package supports, the floor of
 * `engines.node` in package.json. That Node lives in tools/node-floor/node_modules, installed on first
 * use from this folder's lockfile; it is put first on PATH, so every process the tests start (the
 * sample apps, the Nest shutdown app) runs on it too. Refuses to run when the Node pinned here is not
 * the floor `engines` states, so the two cannot drift apart.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const NODE_BIN = path.join(HERE, 'node_modules', 'node', 'bin');
const NODE = path.join(NODE_BIN, 'node');

interface Manifest {
  engines?: { node?: string };
  dependencies?: Record<string, string>;
}

const readJson = (file: string): Manifest => JSON.parse(readFileSync(file, 'utf8')) as Manifest;
const floor = /^\^?(\d+\.\d+\.\d+)/.exec(readJson(path.join(ROOT, 'package.json')).engines?.node ?? '')?.[1];
const pinned = readJson(path.join(HERE, 'package.json')).dependencies?.node;
if (floor === undefined || pinned !== floor) {
  console.error(
    `test:floor: engines.node starts at ${floor ?? '(none)'} but tools/node-floor pins node@${pinned ?? '(none)'}; make them agree`,
  );
  process.exit(1);
}
if (!existsSync(NODE)) {
  console.log(`installing node@${pinned} into tools/node-floor …`);
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', HERE], { stdio: 'inherit' });
}
const version = execFileSync(NODE, ['--version'], { encoding: 'utf8' }).trim();
console.log(`jest on Node ${version} (the floor of engines.node)`);
const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
const run = spawnSync(
  NODE,
  ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning', jest, ...process.argv.slice(2)],
  {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, PATH: `${NODE_BIN}${path.delimiter}${process.env.PATH ?? ''}` },
  },
);
process.exit(run.status ?? 1);
