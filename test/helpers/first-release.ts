/**
 * The first release (`v0.1.0`), as a source tree a test can run: its own sample apps, its own bus, its
 * own wire. The rolling-upgrade suite starts the first release's Express sample beside today's to show
 * that nodes of both releases, sharing one Redis, serve each other's streams during a deploy.
 *
 * The tree comes from git (`git archive` of the tag, or of the commit when a clone has no tags), is
 * unpacked once per commit into a cache directory outside the repository, and borrows the repository's
 * node_modules through a symlink: the release's own `package.json` (its `exports`, with the
 * `mcp-subscriptions-source` condition) makes `mcp-subscriptions` resolve to the release's sources, and
 * every other package (express, ioredis, the SDK, tsx) to the repository's installed one.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from './sample-app.ts';

/** The first release's tag. */
export const FIRST_RELEASE_TAG = 'v0.1.0';

/** The commit the tag names: the fallback in a clone without tags (a shallow CI checkout, a fork). */
export const FIRST_RELEASE_COMMIT = '649f73a9fbe2b72a5dfeae70a1194993e02e922b';

/**
 * Where unpacked releases are kept: one directory per checkout (its node_modules is the one linked) and
 * commit.
 */
const CACHE_ROOT = path.join(
  os.tmpdir(),
  'mcp-subscriptions-first-release',
  createHash('sha256').update(REPO_ROOT).digest('hex').slice(0, 12),
);

/** A release's source tree, ready to run. */
export interface ReleaseTree {
  /** The commit it was unpacked from. */
  readonly commit: string;
  /** The tree's root: its package.json, lib/, adapters/, sample-app/. */
  readonly root: string;
}

function git(args: string[], input?: Buffer): { status: number | null; stdout: Buffer; stderr: string } {
  const run = spawnSync('git', ['-C', REPO_ROOT, ...args], { input, maxBuffer: 256 * 1024 * 1024 });
  if (run.error !== undefined) {
    throw new Error(
      `The first release's sources come from git, which could not be run (${run.error.message}): install git and run the tests from a clone`,
    );
  }
  return { status: run.status, stdout: run.stdout, stderr: run.stderr.toString('utf8') };
}

/** The commit of the first release: the tag's, else the recorded commit when the clone has it. */
function releaseCommit(): string {
  const tagged = git(['rev-parse', '--verify', '--quiet', `${FIRST_RELEASE_TAG}^{commit}`]);
  if (tagged.status === 0) return tagged.stdout.toString('utf8').trim();
  const known = git(['cat-file', '-e', `${FIRST_RELEASE_COMMIT}^{commit}`]);
  if (known.status === 0) return FIRST_RELEASE_COMMIT;
  throw new Error(
    `The first release (tag ${FIRST_RELEASE_TAG}, commit ${FIRST_RELEASE_COMMIT}) is not in this clone: run \`git fetch --tags\` (or \`git fetch --unshallow\` in a shallow clone) to run the rolling-upgrade tests`,
  );
}

/**
 * The first release's tree, unpacked on first use. Unpacking goes to a directory of its own and is
 * renamed into place at the end, so that two test workers never see half a tree; the loser of a race
 * throws its copy away.
 */
export function firstRelease(): ReleaseTree {
  const commit = releaseCommit();
  const root = path.join(CACHE_ROOT, commit);
  const linkedModules = path.join(root, 'node_modules');
  if (!existsSync(path.join(root, 'package.json')) || !existsSync(linkedModules)) {
    mkdirSync(CACHE_ROOT, { recursive: true });
    const staging = path.join(CACHE_ROOT, `.${commit}-${process.pid}-${Date.now()}`);
    mkdirSync(staging);
    try {
      const archive = git(['archive', '--format=tar', commit]);
      if (archive.status !== 0) throw new Error(`git archive ${commit} failed: ${archive.stderr.trim()}`);
      const untar = spawnSync('tar', ['-x', '-C', staging], { input: archive.stdout });
      if (untar.status !== 0) {
        throw new Error(`unpacking the first release into ${staging} failed: ${untar.stderr.toString('utf8').trim()}`);
      }
      symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(staging, 'node_modules'), 'dir');
      try {
        renameSync(staging, root);
      } catch (error) {
        // Another worker got there first (or a broken copy sits there): keep a whole one.
        if (!existsSync(path.join(root, 'node_modules'))) {
          rmSync(root, { recursive: true, force: true });
          renameSync(staging, root);
        } else if (
          (error as NodeJS.ErrnoException).code !== 'ENOTEMPTY' &&
          (error as NodeJS.ErrnoException).code !== 'EEXIST'
        ) {
          throw error;
        }
      }
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  return { commit, root };
}
