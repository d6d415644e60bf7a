/**
 * `npm run build` (and so `prepack`): the ES module build (dist/) and the CommonJS one (dist/cjs/,
 * with its `{"type":"commonjs"}`), their declarations' imports rewritten (declaration-imports.ts).
 *
 * Both are compiled into a staging folder of this process's own and swapped in by two renames at the
 * end, never by emptying dist/ first: `npm pack` lists dist/ after its `prepack` ran, and a build that
 * emptied dist/ meanwhile (another pack's, one run by hand) made it pack no build at all, the 56 files
 * of the sources alone. Now dist/ is always a whole build, the previous one or this one, and a build
 * that fails, or lacks an entry point package.json names, leaves the previous one in place. The
 * staging folder sits beside dist/, at its depth, so that the source maps' relative paths are dist/'s.
 *
 * Usage: node --import tsx tools/build/build.ts
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { missingEntryPoints, type EntryManifest } from './entry-points.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = path.join(ROOT, 'dist');
/** Staging and swapped-out folders: `.dist-<pid>`, `.dist-old-<pid>-<n>` (ignored by git, ESLint, Prettier). */
const LEFTOVER = /^\.dist-(?:old-)?(\d+)(?:-\d+)?$/;

/** Whether process `pid` is still running (a folder of a live build is not a leftover). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the folders that builds killed before their end left behind. */
function removeLeftovers(): void {
  for (const name of readdirSync(ROOT)) {
    const pid = LEFTOVER.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !alive(Number(pid))) {
      rmSync(path.join(ROOT, name), { recursive: true, force: true });
    }
  }
}

/** Runs node with `args` in the repository; its output goes to stderr, as `npm pack --json` owns stdout. */
function node(args: string[]): void {
  execFileSync(process.execPath, args, { cwd: ROOT, stdio: ['ignore', process.stderr, process.stderr] });
}

/** Replaces dist/ with `staging`; another build may swap its own in meanwhile, and the last one stays. */
function swapIn(staging: string): void {
  const replaced: string[] = [];
  for (let attempt = 0; ; attempt++) {
    const old = path.join(ROOT, `.dist-old-${process.pid}-${attempt}`);
    try {
      renameSync(DIST, old);
      replaced.push(old);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    try {
      renameSync(staging, DIST);
      break;
    } catch (error) {
      // Another build's dist/ arrived between the two renames: move it aside too, a few times at most.
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || attempt >= 10) throw error;
    }
  }
  for (const old of replaced) rmSync(old, { recursive: true, force: true });
}

removeLeftovers();
const staging = path.join(ROOT, `.dist-${process.pid}`);
try {
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  node([tsc, '-p', 'tsconfig.build.json', '--outDir', staging]);
  node([tsc, '-p', 'tsconfig.cjs.json', '--outDir', path.join(staging, 'cjs')]);
  writeFileSync(path.join(staging, 'cjs', 'package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');
  node(['--import', 'tsx', path.join('tools', 'build', 'declaration-imports.ts'), staging]);

  const manifest = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as EntryManifest;
  const missing = missingEntryPoints(manifest, (file) =>
    existsSync(file.startsWith('dist/') ? path.join(staging, file.slice('dist/'.length)) : path.join(ROOT, file)),
  );
  if (missing.length > 0) {
    throw new Error(
      `the build lacks entry points package.json names; dist/ is left as it was:\n${missing
        .map(({ file, from }) => `  ${file}  (${from})`)
        .join('\n')}`,
    );
  }
  swapIn(staging);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
