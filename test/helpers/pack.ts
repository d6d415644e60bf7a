/**
 * The package as users install it: `npm pack` (which runs `prepack`, the ESM and the CommonJS builds)
 * into a temporary folder, and unpacking that tarball into an app's `node_modules/mcp-subscriptions`.
 * Tests of the published artefact (Nest compatibility, the examples, module resolution) start here.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
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

/** Packs the repository as `npm publish` would. */
export function packPackage(): Packed {
  const dir = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-pack-'));
  execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: REPO_ROOT, stdio: 'ignore' });
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
