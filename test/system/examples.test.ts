/**
 * The example apps (examples/express, examples/nest) as a user gets them: each installed from its own
 * lockfile with `npm ci` (first use, or when the lockfile changed), with the package `npm pack` makes
 * unpacked over it, type-checked and compiled with the repository's tsc, started as a user starts it,
 * and exercised over real HTTP: the app's own 401, the read check narrowing a listen's
 * acknowledgement, `server/discover` advertising exactly what listen honours, a REST change reaching
 * the stream, and SIGTERM ending the stream with its terminal result before the process exits 0.
 *
 * Also: the README's quick starts are excerpts of these apps (every fenced block marked
 * `<!-- from examples/… -->` must still be in that file), and its `curl` listen request works as
 * written against both running examples, each header refused when left out.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { bearer } from '../helpers/bearer.ts';
import { installPacked, packPackage, PACK_TIMEOUT_MS, type Packed } from '../helpers/pack.ts';
import { mcpRequest, REPO_ROOT } from '../helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const EXAMPLES = path.join(REPO_ROOT, 'examples');
const TSC = path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const README = path.join(REPO_ROOT, 'README.md');
const PACKAGE = 'mcp-subscriptions';
/** Whether this Node can run a `.ts` file itself (`--experimental-strip-types`, Node 22.6 and newer). */
const STRIPS_TYPES = process.allowedNodeEnvironmentFlags.has('--experimental-strip-types');

// A first run installs each example's dependencies with `npm ci`; later runs only unpack and compile.
const EXAMPLE_TIMEOUT_MS = 600_000;

type Example = 'express' | 'nest';

interface Manifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface Lockfile {
  packages: Record<string, { version?: string }>;
}

const exampleDir = (example: Example): string => path.join(EXAMPLES, example);
const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

let packed: Packed | undefined;
const children = new Set<ChildProcess>();
const streams: SseStream[] = [];

beforeAll(() => {
  packed = packPackage();
}, PACK_TIMEOUT_MS);

/** Kills `child` and whatever it started (tsx runs the app in a child process of its own). */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

afterAll(() => {
  for (const stream of streams.splice(0)) stream.close();
  for (const child of children) killGroup(child);
  packed?.dispose();
});

/**
 * Installs the example's dependencies exactly as its lockfile pins them, then unpacks the packed
 * package over them. The lockfile leaves mcp-subscriptions out while it is not on npm (see the
 * example's README), so `npm ci` would refuse the example's own package.json: it runs on a copy
 * without that dependency, in a staging folder beside it, whose node_modules is then moved in.
 */
function install(example: Example): void {
  const dir = exampleDir(example);
  const lockText = readFileSync(path.join(dir, 'package-lock.json'));
  const stamp = path.join(dir, 'node_modules', '.installed-lockfile-sha256');
  const hash = createHash('sha256').update(lockText).digest('hex');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== hash) {
    const staging = path.join(dir, '.install');
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging);
    const manifest = readJson<Manifest>(path.join(dir, 'package.json'));
    const lock = JSON.parse(lockText.toString('utf8')) as Lockfile;
    if (lock.packages[`node_modules/${PACKAGE}`] === undefined) delete manifest.dependencies?.[PACKAGE];
    writeFileSync(path.join(staging, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    copyFileSync(path.join(dir, 'package-lock.json'), path.join(staging, 'package-lock.json'));
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: staging, stdio: 'pipe' });
    rmSync(path.join(dir, 'node_modules'), { recursive: true, force: true });
    renameSync(path.join(staging, 'node_modules'), path.join(dir, 'node_modules'));
    rmSync(staging, { recursive: true, force: true });
    writeFileSync(stamp, hash);
  }
  installPacked(packed!.tarball, dir);
}

/** The repository's tsc on the example's own tsconfig; throws with the compiler's output on an error. */
function tsc(example: Example, ...args: string[]): void {
  const dir = exampleDir(example);
  rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
  try {
    execFileSync(process.execPath, [TSC, '-p', dir, ...args], { stdio: 'pipe' });
  } catch (error) {
    const { stdout } = error as { stdout?: Buffer };
    throw new Error(`tsc -p examples/${example} ${args.join(' ')} failed:\n${stdout?.toString() ?? String(error)}`);
  }
}

interface RunningExample {
  readonly url: string;
  readonly baseUrl: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  stderr(): string;
}

/** Starts `node <args>` in the example's folder with PORT=0 and waits for its `listening on` line. */
function start(example: Example, args: readonly string[]): Promise<RunningExample> {
  const child = spawn(process.execPath, args, {
    cwd: exampleDir(example),
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // A process group of its own, so that a failed test can end the app and any process it started.
    detached: true,
  });
  // Kept after it exits: the group may outlive its leader.
  children.add(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (err += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`examples/${example} printed no "listening on" line within 60 s:\n${out}\n${err}`));
    }, 60_000);
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const match = /^listening on (http:\/\/[^/\s]+)\/mcp$/m.exec(out);
      if (match === null) return;
      clearTimeout(timer);
      resolve({ url: `${match[1]!}/mcp`, baseUrl: match[1]!, child, exited, stderr: () => err });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`examples/${example} exited with ${code} before listening:\n${out}\n${err}`));
    });
  });
}

/** `PUT /notes/:name` as the owner of `token`. */
async function saveNote(app: RunningExample, token: string, name: string, text: string): Promise<unknown> {
  const res = await fetch(new URL(`/notes/${name}`, app.baseUrl), {
    method: 'PUT',
    headers: { 'content-type': 'application/json', ...bearer(token) },
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(200);
  return res.json();
}

const updatesOf = (stream: SseStream): string[] =>
  stream.events
    .filter((event) => event.json?.method === 'notifications/resources/updated')
    .map((event) => event.json.params.uri as string);

/** The listen request of the README's `curl` example: its headers and body, as written. */
function readmeCurl(): { url: string; headers: Record<string, string>; body: string; streaming: boolean } {
  const block = /```sh\n(curl -N[\s\S]*?)```/.exec(readFileSync(README, 'utf8'))?.[1];
  if (block === undefined) throw new Error('README.md has no ```sh block starting with `curl -N`');
  const url = /^curl -N (\S+)/.exec(block)?.[1];
  const headers: Record<string, string> = {};
  for (const [, header] of block.matchAll(/-H '([^']*)'/g)) {
    const colon = header!.indexOf(':');
    headers[header!.slice(0, colon).trim().toLowerCase()] = header!.slice(colon + 1).trim();
  }
  const body = /-d '([^']*)'/.exec(block)?.[1];
  if (url === undefined || body === undefined)
    throw new Error(`README.md's curl example has no URL or no -d:\n${block}`);
  return { url, headers, body, streaming: /^curl -N /.test(block) };
}

/** What the examples offer: every list change and resource subscriptions, no Tasks extension. */
const OFFERED_CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { listChanged: true, subscribe: true },
};

async function exercise(app: RunningExample, { curl = false } = {}): Promise<void> {
  // The app's own auth runs before listen.
  const refused = await post(app.url, listenBody('anonymous', { toolsListChanged: true }), listenHeaders());
  streams.push(refused);
  await refused.end();
  expect(refused.status).toBe(401);
  expect(refused.headers['www-authenticate']).toBe('Bearer');

  // Alice asks for every kind and for her note and bob's: bob's is dropped as if never asked for.
  const stream = await listen(
    app.url,
    'listen-1',
    {
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: ['note://alice/todo', 'note://bob/secret'],
    },
    bearer('alice-token'),
  );
  streams.push(stream);
  expect(stream.status).toBe(200);
  const ack = (await stream.event(1)).json;
  expect(ack.method).toBe('notifications/subscriptions/acknowledged');
  expect(ack.params.notifications).toStrictEqual({
    toolsListChanged: true,
    promptsListChanged: true,
    resourcesListChanged: true,
    resourceSubscriptions: ['note://alice/todo'],
  });

  // server/discover (answered by the SDK's handler behind the listen route) advertises exactly that.
  const discover = await mcpRequest(app.url, 'alice-token', 'server/discover');
  expect(discover.status).toBe(200);
  const { capabilities } = discover.message.result;
  expect(capabilities).toStrictEqual(OFFERED_CAPABILITIES);
  const honoured = ack.params.notifications;
  expect({
    toolsListChanged: capabilities.tools?.listChanged === true,
    promptsListChanged: capabilities.prompts?.listChanged === true,
    resourcesListChanged: capabilities.resources?.listChanged === true,
    resourceSubscriptions: capabilities.resources?.subscribe === true,
  }).toStrictEqual({
    toolsListChanged: honoured.toolsListChanged === true,
    promptsListChanged: honoured.promptsListChanged === true,
    resourcesListChanged: honoured.resourcesListChanged === true,
    resourceSubscriptions: honoured.resourceSubscriptions !== undefined,
  });

  // The README's curl request, headers and body as written, is acknowledged the same way.
  let curlStream: SseStream | undefined;
  if (curl) {
    const request = readmeCurl();
    expect(request.streaming).toBe(true);
    expect(new URL(request.url).pathname).toBe('/mcp');
    curlStream = await post(app.url, request.body, request.headers);
    streams.push(curlStream);
    expect(curlStream.status).toBe(200);
    expect(curlStream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect((await curlStream.event(1)).json.params.notifications).toStrictEqual({
      resourceSubscriptions: ['note://alice/todo'],
    });
    // What each header is for, as the README says: a request without it (or, for Accept, with one that
    // lists no event stream) is refused before a stream opens. With -d and no Content-Type, curl sends a form.
    const instead: Record<string, string | undefined> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    const refusals: Record<string, number> = {};
    for (const name of Object.keys(request.headers)) {
      const { [name]: _left, ...rest } = request.headers;
      const replacement = instead[name];
      const without = await post(
        app.url,
        request.body,
        replacement === undefined ? rest : { ...rest, [name]: replacement },
      );
      streams.push(without);
      await without.end();
      refusals[name] = without.status;
    }
    expect(refusals).toStrictEqual({
      'content-type': 415,
      accept: 406,
      'mcp-protocol-version': 400,
      'mcp-method': 400,
      authorization: 401,
    });
  }

  // A REST change reaches the stream; a change of bob's note reaches bob's streams only.
  expect(await saveNote(app, 'alice-token', 'todo', 'milk')).toStrictEqual({ uri: 'note://alice/todo' });
  await stream.until(() => updatesOf(stream).length === 1, 'the first resources/updated');
  expect(await saveNote(app, 'bob-token', 'secret', 'for bob')).toStrictEqual({ uri: 'note://bob/secret' });
  await saveNote(app, 'alice-token', 'todo', 'milk, eggs');
  // Events on one stream keep their publish order, so bob's update would have come before this one.
  await stream.until(() => updatesOf(stream).length === 2, 'the second resources/updated');
  expect(updatesOf(stream)).toStrictEqual(['note://alice/todo', 'note://alice/todo']);

  // SIGTERM: every stream ends with its terminal result, then the process exits 0.
  app.child.kill('SIGTERM');
  for (const open of [stream, ...(curlStream === undefined ? [] : [curlStream])]) {
    await open.end(10_000);
    const last = open.events.at(-1)?.json;
    expect(last?.result?.resultType).toBe('complete');
    expect(last?.id).toBe(open === stream ? 'listen-1' : JSON.parse(readmeCurl().body).id);
  }
  expect(await app.exited).toBe(0);
}

describe('the example apps, installed from their lockfiles with the packed package', () => {
  it('every dependency the examples share with the repository is pinned to the version its lockfile has', () => {
    const root = readJson<Lockfile>(path.join(REPO_ROOT, 'package-lock.json')).packages;
    const drift: string[] = [];
    for (const example of ['express', 'nest'] as const) {
      const manifest = readJson<Manifest>(path.join(exampleDir(example), 'package.json'));
      expect(manifest.dependencies?.[PACKAGE]).toBe('^0.1.0');
      for (const [name, spec] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
        const version = root[`node_modules/${name}`]?.version;
        if (name !== PACKAGE && version !== undefined && spec !== version) {
          drift.push(`examples/${example}: ${name} ${spec}, the repository ${version}`);
        }
      }
    }
    expect(drift).toStrictEqual([]);
  });

  it(
    'Express (ES modules): type-checks, then serves listen run by tsx, compiled, and (Node 22.6+) type-stripped',
    async () => {
      install('express');
      tsc('express', '--noEmit');
      await exercise(await start('express', ['node_modules/.bin/tsx', 'src/main.ts']), { curl: true });
      tsc('express');
      await exercise(await start('express', ['dist/main.js']));
      // The README's third way, where this Node has it (22.6 and newer).
      if (STRIPS_TYPES) await exercise(await start('express', ['--experimental-strip-types', 'src/main.ts']));
    },
    EXAMPLE_TIMEOUT_MS,
  );

  it(
    'NestJS 11 (CommonJS, decorator metadata): compiles, runs and serves listen behind its guards',
    async () => {
      install('nest');
      tsc('nest');
      await exercise(await start('nest', ['dist/main.js']), { curl: true });
    },
    EXAMPLE_TIMEOUT_MS,
  );
});

/** Lines without their leading indentation (and trailing blanks), for comparing excerpts. */
const normalize = (text: string): string[] => text.split('\n').map((line) => line.trim());

/** How a line of a README excerpt that stands for lines of the file left out starts (`// … more`). */
const ELISION = '// …';

interface Excerpt {
  readonly file: string;
  readonly line: number;
  readonly code: string;
}

/** Every fenced block of the README right below a `<!-- from examples/… -->` line, with the file it names. */
function readmeExcerpts(): Excerpt[] {
  const lines = readFileSync(README, 'utf8').split('\n');
  const excerpts: Excerpt[] = [];
  lines.forEach((line, i) => {
    const file = /^\s*<!-- from (examples\/\S+) -->\s*$/.exec(line)?.[1];
    if (file === undefined) return;
    const open = lines.findIndex((next, j) => j > i && next.trim() !== '');
    const close = lines.findIndex((next, j) => j > open && /^\s*```\s*$/.test(next));
    if (open === -1 || !/^\s*```/.test(lines[open]!) || close === -1) {
      throw new Error(`README.md:${i + 1}: the marker is not right above a fenced block`);
    }
    excerpts.push({ file, line: open + 2, code: lines.slice(open + 1, close).join('\n') });
  });
  return excerpts;
}

/** The lines of `code` missing from `file`: each run between elisions must appear there, in order. */
function missingFrom(file: string, code: string): string | undefined {
  const source = normalize(readFileSync(path.join(REPO_ROOT, file), 'utf8'));
  const runs: string[][] = [[]];
  for (const line of normalize(code)) {
    if (line.startsWith(ELISION)) runs.push([]);
    else runs.at(-1)!.push(line);
  }
  let from = 0;
  for (const run of runs.filter((lines) => lines.length > 0)) {
    const at = source.findIndex((_line, i) => i >= from && run.every((expected, k) => source[i + k] === expected));
    if (at === -1) return run.join('\n');
    from = at + run.length;
  }
  return undefined;
}

describe("the README's quick starts are cut from the examples", () => {
  it('every code block of both Quick start sections is an excerpt of a named example file, still in it', () => {
    const readme = readFileSync(README, 'utf8');
    for (const section of ['## Quick start (your Express app)', '## Quick start (your NestJS app)']) {
      const start = readme.indexOf(section);
      expect(start).toBeGreaterThanOrEqual(0);
      const end = readme.indexOf('\n## ', start + section.length);
      const body = readme.slice(start, end === -1 ? undefined : end);
      const blocks = [...body.matchAll(/(<!-- from examples\/\S+ -->\n\n?)?```ts\n/g)];
      expect(blocks.length).toBeGreaterThan(0);
      const unmarked = blocks.filter((block) => block[1] === undefined).length;
      expect({ section, unmarked }).toStrictEqual({ section, unmarked: 0 });
    }
    const excerpts = readmeExcerpts();
    expect(new Set(excerpts.map(({ file }) => file.split('/')[1]))).toStrictEqual(new Set(['express', 'nest']));
    const stale = excerpts
      .map(({ file, line, code }) => ({ at: `README.md:${line} (${file})`, missing: missingFrom(file, code) }))
      .filter(({ missing }) => missing !== undefined);
    expect(stale).toStrictEqual([]);
  });

  it('an excerpt that is not in its file is caught', () => {
    const file = 'examples/express/src/app.ts';
    const lines = readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n');
    const imports = lines.filter((line) => line.startsWith('import ')).join('\n');
    const later = lines.find((line) => line.includes('new SubscriptionHub()'))!;
    expect(missingFrom(file, imports)).toBeUndefined();
    expect(missingFrom(file, `  ${imports.replaceAll('\n', '\n    ')}`)).toBeUndefined(); // indentation aside
    expect(missingFrom(file, `${imports}\n${ELISION}\n${later}`)).toBeUndefined();
    expect(missingFrom(file, imports.replace('mcpSubscriptions', 'mcpSubscription'))).toBeDefined();
    expect(missingFrom(file, `${later}\n${ELISION}\n${imports}`)).toBeDefined(); // order counts
    expect(missingFrom(file, `${imports}\n${later}`)).toBeDefined(); // a gap needs an elision
  });
});
