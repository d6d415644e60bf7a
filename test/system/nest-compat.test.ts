/**
 * NestJS 11 and 12 with the BUILT package, as users install it: `npm pack` (which runs the build),
 * unpacked into two small host apps, each with its own Nest major from its own lockfile
 * (test/nest-compat/nest11, nest12; installed with `npm ci` on first use). The Nest 11 app is compiled
 * to CommonJS and loads `mcp-subscriptions/nest` through `require()`; the Nest 12 app (Nest 12 ships ES
 * modules only) is compiled to ES modules and loads it through `import`. Both compile with decorator
 * metadata, as `nest build` does, so their services get the hub injected by type.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { bearer } from '../helpers/bearer.ts';
import { installPacked, packPackage, PACK_TIMEOUT_MS, type Packed } from '../helpers/pack.ts';
import { REPO_ROOT } from '../helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const FIXTURES = path.join(REPO_ROOT, 'test', 'nest-compat');
const TSC = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let packed: Packed | undefined;
const children = new Set<ChildProcess>();
const streams: SseStream[] = [];

// A first run installs each fixture's own Nest with `npm ci`, then compiles and starts the app.
const FIXTURE_TIMEOUT_MS = 600_000;

beforeAll(() => {
  packed = packPackage();
}, PACK_TIMEOUT_MS);

afterAll(() => {
  for (const stream of streams.splice(0)) stream.close();
  for (const child of children) child.kill('SIGKILL');
  packed?.dispose();
});

const prepared = new Set<string>();

/**
 * Installs the fixture's own Nest from its lockfile (first use only), unpacks the package, compiles the
 * app: once per fixture and run.
 */
function prepare(fixture: string): void {
  if (prepared.has(fixture)) return;
  prepared.add(fixture);
  const dir = path.join(FIXTURES, fixture);
  if (!existsSync(path.join(dir, 'node_modules', '@nestjs', 'platform-fastify'))) {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', dir], { stdio: 'ignore' });
  }
  installPacked(packed!.tarball, dir);
  rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [TSC, '-p', dir], { stdio: 'pipe' });
}

interface RunningFixture {
  readonly url: string;
  readonly banner: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
}

function run(fixture: string, platform: 'express' | 'fastify'): Promise<RunningFixture> {
  const dir = path.join(FIXTURES, fixture);
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NEST_PLATFORM: platform },
  });
  children.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (err += chunk));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const match = /^listening on (\S+)$/m.exec(out);
      if (match) resolve({ url: match[1]!, banner: out, child, exited });
    });
    void exited.then((code) => reject(new Error(`${fixture} exited with ${code} before listening:\n${out}\n${err}`)));
  });
}

async function exercise(app: RunningFixture): Promise<void> {
  const refused = await post(app.url, listenBody('nobody', { toolsListChanged: true }), listenHeaders());
  streams.push(refused);
  await refused.end();
  expect(refused.status).toBe(401); // the global guard runs on the listen route

  const stream = await listen(
    app.url,
    'compat',
    { resourceSubscriptions: ['note://alice/a', 'note://bob/b'] },
    bearer('alice-token'),
  );
  streams.push(stream);
  expect(stream.status).toBe(200);
  const ack = (await stream.event(1)).json;
  expect(ack.params.notifications).toStrictEqual({ resourceSubscriptions: ['note://alice/a'] }); // the read guard decided

  const other = await fetch(app.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...bearer('alice-token') },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  expect(((await other.json()) as { host?: boolean }).host).toBe(true); // everything else reaches the host route

  // The host service got the hub injected by type, and publishes through it.
  const saved = await fetch(new URL('/notes/a', app.url), { method: 'POST', headers: bearer('alice-token') });
  expect(saved.status).toBe(201);
  const update = (await stream.event(2)).json;
  expect(update.method).toBe('notifications/resources/updated');
  expect(update.params.uri).toBe('note://alice/a');

  app.child.kill('SIGTERM');
  await stream.end();
  expect(stream.events.at(-1)?.json?.result?.resultType).toBe('complete'); // app.close() ended the stream
  expect(await app.exited).toBe(0);
}

describe('NestJS 11 and 12, CommonJS and ES modules, from the built package', () => {
  it(
    'Nest 11, a CommonJS app: require() loads the CommonJS build, and both builds agree in one process',
    async () => {
      prepare('nest11');
      const app = await run('nest11', 'express');
      expect(app.banner).toMatch(/format=commonjs nest=11\.\d+\.\d+ /);
      expect(app.banner).toMatch(/loaded=\S*node_modules\/mcp-subscriptions\/dist\/cjs\/adapters\/nest\/index\.js /);
      expect(app.banner).toMatch(/copiesAgree=true/); // errors are told apart by code across the two copies
      await exercise(app);
    },
    FIXTURE_TIMEOUT_MS,
  );

  it(
    'Nest 12, an ES module app: import loads the ES module build',
    async () => {
      prepare('nest12');
      const app = await run('nest12', 'express');
      expect(app.banner).toMatch(/format=module nest=12\.\d+\.\d+ /);
      expect(app.banner).toMatch(/loaded=file:\S*node_modules\/mcp-subscriptions\/dist\/adapters\/nest\/index\.js/);
      await exercise(app);
    },
    FIXTURE_TIMEOUT_MS,
  );

  it.each(['nest11', 'nest12'])(
    '%s on the Fastify platform: the same listen, without a duplicate route',
    async (fixture) => {
      prepare(fixture);
      const app = await run(fixture, 'fastify');
      expect(app.banner).toMatch(/platform=fastify/);
      await exercise(app);
    },
    FIXTURE_TIMEOUT_MS,
  );
});
