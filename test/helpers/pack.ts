/**
 * The package as users install it: `npm pack` (which runs `prepack`, the ESM and the CommonJS builds)
 * into a temporary folder, and unpacking that tarball into an app's `node_modules/mcp-subscriptions`.
 * Tests of the published artefact (Nest compatibility, the examples, module resolution) start here.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './sample-app.ts';

/** `npm pack` builds the package twice (ESM and CommonJS) before it packs: minutes on a busy machine. */
export const PACK_TIMEOUT_MS = 300_000;

/** A packed tarball, and how to remove it. */
export interface Packed {
  /** The tarball's path. */
  readonly tarball: string;
  /** Removes the tarball's folder. */
  dispose(): void;
}

/**
 * Packs take turns through a lock directory (its creation is atomic), so that jest workers on a machine
 * with more cores do not build the package twice at once; a lock older than a pack could ever take is
 * one a killed run left behind. Correctness no longer rests on it: the build swaps a whole dist/ in
 * (tools/build/build.ts), and `prepack` fails when an entry point is missing.
 */
const LOCK = path.join(REPO_ROOT, 'node_modules', '.cache', 'mcp-subscriptions-pack.lock');

function withPackLock<T>(run: () => T): T {
  mkdirSync(path.dirname(LOCK), { recursive: true });
  const deadline = Date.now() + PACK_TIMEOUT_MS;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const held = statSync(LOCK, { throwIfNoEntry: false });
      if (held === undefined) continue; // released meanwhile: try again at once
      if (Date.now() - held.mtimeMs > PACK_TIMEOUT_MS) rmSync(LOCK, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`another pack held ${LOCK} for too long`);
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250);
    }
  }
  try {
    return run();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/** Packs the repository as `npm publish` would. */
export function packPackage(): Packed {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-pack-'));
  withPackLock(() =>
    execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: REPO_ROOT, stdio: 'ignore' }),
  );
  const name = readdirSync(dir).find((file) => file.endsWith('.tgz'));
  if (name === undefined) throw new Error('npm pack wrote no tarball');
  return { tarball: path.join(dir, name), dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Unpacks `tarball` as `<appDir>/node_modules/mcp-subscriptions`, replacing what was there. */
export function installPacked(tarball: string, appDir: string): void {
  const target = path.join(appDir, 'node_modules', 'mcp-subscriptions');
  rmSync(target, { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', target, '--strip-components=1']);
}

/**
 * Installs an example app's dependencies exactly as its lockfile pins them (once per lockfile: a stamp
 * in its node_modules remembers which), then unpacks `tarball` over them. The lockfile leaves
 * mcp-subscriptions out while it is not on npm (see the examples' READMEs), so `npm ci` would refuse the
 * example's own package.json: it runs on a copy without that dependency, in a staging folder beside it,
 * whose node_modules is then moved in.
 */
export function installExample(dir: string, tarball: string): void {
  const lockText = readFileSync(path.join(dir, 'package-lock.json'));
  const stamp = path.join(dir, 'node_modules', '.installed-lockfile-sha256');
  const hash = createHash('sha256').update(lockText).digest('hex');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== hash) {
    const staging = path.join(dir, '.install');
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging);
    const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    const lock = JSON.parse(lockText.toString('utf8')) as { packages: Record<string, unknown> };
    if (lock.packages['node_modules/mcp-subscriptions'] === undefined)
      delete manifest.dependencies?.['mcp-subscriptions'];
    writeFileSync(path.join(staging, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    copyFileSync(path.join(dir, 'package-lock.json'), path.join(staging, 'package-lock.json'));
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: staging, stdio: 'pipe' });
    rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true });
    renameSync(path.join(staging, 'node_modules'), path.join(dir, 'node_modules'));
    rmSync(staging, { recursive: true, force: true });
    writeFileSync(stamp, hash);
  }
  installPacked(tarball, dir);
}
