/**
 * `npm run conformance`: runs the MCP conformance suite's `server-stateless` scenario against each
 * sample app (started with MCP_CONFORMANCE=1 on a free port), prints one line per check and a closing
 * `N passed, M failed` line, and exits non-zero unless every check passed and every listen check was
 * served by mcp-subscriptions (the sample's hub counted the streams the suite opened).
 *
 * The suite needs Node 22; it and that Node live in tools/conformance/node_modules, installed on first
 * use from this folder's lockfile, so the repository's own scripts keep the Node that runs npm.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  REPO_ROOT,
  sampleHost,
  selectedSampleKinds,
  startSample,
  TOKENS,
  type SampleApp,
  type SampleKind,
} from '../../test/helpers/sample-app.ts';

const SUITE_VERSION = '0.2.0-alpha.12';
const SCENARIO = 'server-stateless';
const HERE = path.join(REPO_ROOT, 'tools', 'conformance');
const NODE22 = path.join(HERE, 'node_modules', 'node', 'bin', 'node');
const SUITE = path.join(HERE, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');
/** The suite's checks of subscriptions/listen: these must be ours to pass. */
const LISTEN_CHECKS = new Set([
  'sep-2575-server-sends-subscription-ack',
  'sep-2575-server-tags-subscription-id',
  'sep-2575-server-honors-notification-filter',
  'sep-2575-server-sends-tools-list-changed-on-subscription',
  'sep-2575-server-sends-prompts-list-changed-on-subscription',
]);
/** How many listen streams the scenario opens (one per listen check but the two that share one). */
const LISTEN_STREAMS_OPENED = 4;

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'SKIPPED' | 'INFO';
  errorMessage?: string;
}

function ensureSuite(): void {
  if (existsSync(NODE22) && existsSync(SUITE)) return;
  console.log(`installing @modelcontextprotocol/conformance@${SUITE_VERSION} and Node 22 into tools/conformance …`);
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', HERE], { stdio: 'inherit' });
}

function runSuite(url: string, outDir: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE22, [SUITE, 'server', '--url', url, '--scenario', SCENARIO, '-o', outDir], {
      cwd: HERE,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}

async function readChecks(outDir: string): Promise<Check[]> {
  const checks: Check[] = [];
  for (const entry of await readdir(outDir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const file = path.join(outDir, entry.name, 'checks.json');
    if (existsSync(file)) checks.push(...(JSON.parse(await readFile(file, 'utf8')) as Check[]));
  }
  return checks;
}

async function listenStreamsOpened(app: SampleApp): Promise<number> {
  const answer = await app.api(TOKENS.alice, 'GET', '/api/subscriptions/stats');
  return (answer.body as { opened: number }).opened;
}

async function runAgainst(kind: SampleKind): Promise<{ passed: number; failed: number }> {
  // startSample refuses a sample whose startup line names another host than this kind's.
  const app = await startSample(kind, { MCP_CONFORMANCE: '1' });
  console.log(`${kind}  INFO     listening on ${app.url} (${app.host ?? 'no host named'})`);
  const outDir = await mkdtemp(path.join(tmpdir(), `conformance-${kind}-`));
  let passed = 0;
  let failed = 0;
  try {
    const openedBefore = await listenStreamsOpened(app);
    const exitCode = await runSuite(app.url, outDir);
    const checks = await readChecks(outDir);
    if (checks.length === 0) throw new Error(`the conformance suite wrote no checks (exit code ${exitCode})`);
    for (const check of checks) {
      const ok = check.status === 'SUCCESS';
      if (ok) passed++;
      else failed++;
      const servedBy = LISTEN_CHECKS.has(check.id) ? 'mcp-subscriptions' : '@modelcontextprotocol/server';
      const why = ok ? '' : ` (served by ${servedBy}): ${check.errorMessage ?? 'no message'}`;
      console.log(`${kind}  ${check.status.padEnd(7)}  ${check.id}${why}`);
    }
    // The listen checks must pass because our middleware served listen, not the SDK behind it.
    const opened = (await listenStreamsOpened(app)) - openedBefore;
    const ours = opened >= LISTEN_STREAMS_OPENED;
    console.log(
      `${kind}  ${ours ? 'SUCCESS' : 'FAILURE'}  listen-served-by-mcp-subscriptions: the sample's hub opened ${opened} listen stream(s) during the run (the scenario opens ${LISTEN_STREAMS_OPENED})`,
    );
    if (ours) passed++;
    else failed++;
  } finally {
    await app.stop();
    await rm(outDir, { recursive: true, force: true });
  }
  return { passed, failed };
}

async function main(): Promise<void> {
  ensureSuite();
  // Every host (SAMPLE_KINDS narrows them, as for the contract suite); a host that cannot start fails the run.
  const kinds = selectedSampleKinds();
  let passed = 0;
  let failed = 0;
  for (const kind of kinds) {
    try {
      const result = await runAgainst(kind);
      passed += result.passed;
      failed += result.failed;
    } catch (error) {
      // One host that cannot be run (it does not start, or names another host) fails the run, not the others.
      failed++;
      console.log(`${kind}  FAILURE  run (host ${sampleHost(kind)}): ${(error as Error).message.split('\n')[0]}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}

await main();
