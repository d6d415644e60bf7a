/**
 * The example apps (examples/express, examples/nest, examples/nest-fastify, examples/fastify) as a user gets them: each installed from its own
 * lockfile with `npm ci` (first use, or when the lockfile changed), with the package `npm pack` makes
 * unpacked over it, type-checked with TypeScript 5 and 7 (the repository's `typescript` and
 * `typescript7`) and compiled with 7 (what the examples pin, and what `npm i typescript` installs),
 * started as a user starts it, and exercised over real HTTP: the app's own 401, the read check
 * narrowing a listen's acknowledgement, `server/discover` advertising exactly what listen honours, a
 * `resources/read` answered for its caller (the SDK behind the listen route sees who asks), a REST change
 * reaching the stream, and SIGTERM ending the stream with its terminal result before the
 * process exits 0. The Express example's own jest test (the client example of docs/client.md), and the
 * Fastify example's, run with their own jest setup against the packed package.
 *
 * Also: the quick starts (docs/express.md's for Express, docs/nest.md's for Nest on either platform, docs/fastify.md's for Fastify) are these apps, file by file (every fenced block marked
 * `<!-- from examples/… -->` is that whole file, and every file, import and package they need is
 * shown), and its `curl` listen request works as written against every running example, each header
 * refused when left out.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { bearer } from '../helpers/bearer.ts';
import { installExample, packPackage, PACK_TIMEOUT_MS, type Packed } from '../helpers/pack.ts';
import { mcpRequest, REPO_ROOT } from '../helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const EXAMPLES = path.join(REPO_ROOT, 'examples');
/** The repository's TypeScripts: 5 (`typescript`) and 7 (`typescript7`, the version the examples pin). */
const TSC = {
  5: path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
  7: path.join(REPO_ROOT, 'node_modules', 'typescript7', 'bin', 'tsc'),
} as const;
const README = path.join(REPO_ROOT, 'README.md');
const PACKAGE = 'mcp-subscriptions';
/** Whether this Node can run a `.ts` file itself (`--experimental-strip-types`, Node 22.6 and newer). */
const STRIPS_TYPES = process.allowedNodeEnvironmentFlags.has('--experimental-strip-types');

// A first run installs each example's dependencies with `npm ci`; later runs only unpack and compile.
const EXAMPLE_TIMEOUT_MS = 600_000;

type Example = 'express' | 'nest' | 'nest-fastify' | 'fastify';

interface Manifest {
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

interface Lockfile {
  packages: Record<string, { version?: string; name?: string }>;
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

/** Installs the example from its lockfile, with the packed package unpacked over it (`installExample`). */
function install(example: Example): void {
  installExample(exampleDir(example), packed!.tarball);
}

/** TypeScript `version` on the example's own tsconfig; throws with the compiler's output on an error. */
function tsc(example: Example, version: keyof typeof TSC, ...args: string[]): void {
  const dir = exampleDir(example);
  rmSync(path.join(dir, 'dist'), { recursive: true, force: true });
  try {
    execFileSync(process.execPath, [TSC[version], '-p', dir, ...args], { stdio: 'pipe' });
  } catch (error) {
    const { stdout } = error as { stdout?: Buffer };
    throw new Error(
      `tsc ${version} -p examples/${example} ${args.join(' ')} failed:\n${stdout?.toString() ?? String(error)}`,
    );
  }
}

/** `npm test` in the example, as its README says; throws with jest's output on a failure. */
function npmTest(example: Example): void {
  try {
    execFileSync('npm', ['test'], { cwd: exampleDir(example), stdio: 'pipe', env: { ...process.env, CI: '1' } });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`npm test in examples/${example} failed:\n${stdout?.toString()}\n${stderr?.toString()}`);
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

/** What the examples offer: resource subscriptions, nothing else. */
const OFFERED_CAPABILITIES = { resources: { subscribe: true } };

async function exercise(app: RunningExample, { curl = false } = {}): Promise<void> {
  // The app's own auth runs before listen.
  const refused = await post(app.url, listenBody('anonymous', { toolsListChanged: true }), listenHeaders());
  streams.push(refused);
  await refused.end();
  expect(refused.status).toBe(401);
  expect(refused.headers['www-authenticate']).toBe('Bearer');

  // Alice asks for every kind and for her note and bob's: bob's is dropped as if never asked for, and so
  // are the kinds the app does not offer.
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
  expect(ack.params.notifications).toStrictEqual({ resourceSubscriptions: ['note://alice/todo'] });

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
  // The rest of MCP knows the caller: alice reads her note, bob gets what a missing note gets.
  const read = (token: string) => mcpRequest(app.url, token, 'resources/read', { uri: 'note://alice/todo' });
  const mine = await read('alice-token');
  expect({ status: mine.status, contents: mine.message.result?.contents }).toStrictEqual({
    status: 200,
    contents: [{ uri: 'note://alice/todo', mimeType: 'text/plain', text: 'milk' }],
  });
  expect((await read('bob-token')).message.error?.message).toMatch(/not found/i);
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
  it('every dependency the examples share with the repository is pinned to a version its lockfile has', () => {
    // The repository's versions of each package, its aliases included (`typescript7` is typescript 7).
    const root = new Map<string, string[]>();
    for (const [key, entry] of Object.entries(readJson<Lockfile>(path.join(REPO_ROOT, 'package-lock.json')).packages)) {
      const alias = /^node_modules\/((?:@[^/]+\/)?[^/]+)$/.exec(key)?.[1];
      if (alias === undefined || entry.version === undefined) continue;
      const name = entry.name ?? alias;
      root.set(name, [...(root.get(name) ?? []), entry.version]);
    }
    const drift: string[] = [];
    for (const example of ['express', 'nest', 'nest-fastify', 'fastify'] as const) {
      const manifest = readJson<Manifest>(path.join(exampleDir(example), 'package.json'));
      expect(manifest.dependencies?.[PACKAGE]).toBe('^0.1.0');
      expect(manifest.devDependencies?.['typescript']).toMatch(/^7\./);
      for (const [name, spec] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
        const versions = root.get(name);
        if (name !== PACKAGE && versions !== undefined && !versions.includes(spec)) {
          drift.push(`examples/${example}: ${name} ${spec}, the repository ${versions.join(' and ')}`);
        }
      }
    }
    expect(drift).toStrictEqual([]);
  });

  it(
    'Express (ES modules): type-checks on TypeScript 5 and 7, passes its own jest test, then serves listen run by tsx, compiled, and (Node 22.6+) type-stripped',
    async () => {
      install('express');
      tsc('express', 5, '--noEmit');
      tsc('express', 7, '--noEmit');
      npmTest('express');
      await exercise(await start('express', ['node_modules/.bin/tsx', 'src/main.ts']), { curl: true });
      tsc('express', 7);
      await exercise(await start('express', ['dist/main.js']));
      // The README's third way, where this Node has it (22.6 and newer).
      if (STRIPS_TYPES) await exercise(await start('express', ['--experimental-strip-types', 'src/main.ts']));
    },
    EXAMPLE_TIMEOUT_MS,
  );

  it(
    'NestJS 11 (CommonJS, decorator metadata): type-checks on TypeScript 5, compiles with 7, runs and serves listen behind its guard',
    async () => {
      install('nest');
      tsc('nest', 5, '--noEmit');
      tsc('nest', 7);
      await exercise(await start('nest', ['dist/main.js']), { curl: true });
    },
    EXAMPLE_TIMEOUT_MS,
  );

  it(
    "NestJS 11 on Nest's Fastify platform: type-checks on TypeScript 5, compiles with 7, runs and serves listen behind its guard",
    async () => {
      install('nest-fastify');
      tsc('nest-fastify', 5, '--noEmit');
      tsc('nest-fastify', 7);
      await exercise(await start('nest-fastify', ['dist/main.js']), { curl: true });
    },
    EXAMPLE_TIMEOUT_MS,
  );

  it(
    'Fastify 5 (ES modules): type-checks on TypeScript 5 and 7, passes its own jest test, then serves listen behind its auth hook, run by tsx and compiled',
    async () => {
      install('fastify');
      tsc('fastify', 5, '--noEmit');
      tsc('fastify', 7, '--noEmit');
      npmTest('fastify');
      await exercise(await start('fastify', ['node_modules/.bin/tsx', 'src/main.ts']), { curl: true });
      tsc('fastify', 7);
      await exercise(await start('fastify', ['dist/main.js']));
      if (STRIPS_TYPES) await exercise(await start('fastify', ['--experimental-strip-types', 'src/main.ts']));
    },
    EXAMPLE_TIMEOUT_MS,
  );
});

/** The pages that show files of the examples. */
const PAGES = ['README.md', 'docs/express.md', 'docs/nest.md', 'docs/fastify.md', 'docs/client.md'];

interface Shown {
  /** Where the block's first line is, `README.md:120`. */
  readonly at: string;
  /** The file the marker names, `examples/express/src/app.ts`. */
  readonly file: string;
  readonly code: string;
}

/** Every fenced block right below a `<!-- from examples/… -->` line of `text`, with the file it names. */
function shownIn(page: string, text: string, firstLine = 1): Shown[] {
  const lines = text.split('\n');
  const shown: Shown[] = [];
  lines.forEach((line, i) => {
    const file = /^<!-- from (examples\/\S+) -->$/.exec(line.trim())?.[1];
    if (file === undefined) return;
    const open = lines.findIndex((next, j) => j > i && next.trim() !== '');
    const close = lines.findIndex((next, j) => j > open && /^```\s*$/.test(next));
    if (open === -1 || !/^```\w+$/.test(lines[open]!) || close === -1) {
      throw new Error(`${page}:${firstLine + i}: the marker is not right above a fenced block`);
    }
    shown.push({ at: `${page}:${firstLine + open + 1}`, file, code: lines.slice(open + 1, close).join('\n') });
  });
  return shown;
}

/** A `## ` section of a page (the README by default), heading to the next `## ` heading, and the line it starts on. */
function readmeSection(heading: string, page = 'README.md'): { text: string; firstLine: number; page: string } {
  const readme = readFileSync(path.join(REPO_ROOT, page), 'utf8');
  const start = readme.indexOf(`\n${heading}\n`);
  if (start === -1) throw new Error(`${page} has no section ${heading}`);
  const end = readme.indexOf('\n## ', start + heading.length + 2);
  return {
    text: readme.slice(start + 1, end === -1 ? undefined : end),
    firstLine: readme.slice(0, start + 1).split('\n').length,
    page,
  };
}

/** The packages the `npm i`/`npm install` commands of `text`'s ```sh blocks install (versions aside). */
function installedBy(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, block] of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const [, args] of block!.matchAll(/\bnpm (?:i|install)\b([^\n&#|;]*)/g)) {
      for (const word of args!.trim().split(/\s+/)) {
        if (word === '' || word.startsWith('-')) continue;
        names.add(/^(@?[^@]+)/.exec(word)![1]!);
      }
    }
  }
  return names;
}

/** The packages a TypeScript file imports: bare specifiers, `node:` ones aside, without their subpath. */
function packagesImportedBy(code: string): Set<string> {
  const names = new Set<string>();
  for (const [, specifier] of code.matchAll(/^import\s(?:[^'"]*\sfrom\s)?'([^']+)'/gm)) {
    if (specifier!.startsWith('.') || specifier!.startsWith('node:')) continue;
    names.add(/^(@[^/]+\/[^/]+|[^/]+)/.exec(specifier!)![1]!);
  }
  return names;
}

/** What a file of the examples is missing from a page: the block differs from the file, or no block shows it. */
function staleBlocks(shown: readonly Shown[]): { at: string; file: string }[] {
  return shown
    .filter(({ file, code }) => {
      const source = path.join(REPO_ROOT, file);
      return !existsSync(source) || readFileSync(source, 'utf8') !== `${code}\n`;
    })
    .map(({ at, file }) => ({ at, file }));
}

/**
 * Every fenced block right below a `<!-- excerpt of examples/… -->` line of `text` (a part of a file, shown
 * where the whole would be too long) whose lines are not all lines of that file, in the same order.
 */
function staleExcerpts(page: string, text: string): { at: string; file: string }[] {
  const lines = text.split('\n');
  const stale: { at: string; file: string }[] = [];
  lines.forEach((line, i) => {
    const file = /^<!-- excerpt of (examples\/\S+) -->$/.exec(line.trim())?.[1];
    if (file === undefined) return;
    const open = lines.findIndex((next, j) => j > i && next.trim() !== '');
    const close = lines.findIndex((next, j) => j > open && /^```\s*$/.test(next));
    const source = path.join(REPO_ROOT, file);
    let at = 0;
    const fileLines = existsSync(source) ? readFileSync(source, 'utf8').split('\n') : [];
    const inOrder =
      /^```\w+$/.test(lines[open] ?? '') &&
      close !== -1 &&
      lines.slice(open + 1, close).every((shown) => {
        if (shown.trim() === '') return true;
        const found = fileLines.findIndex((candidate, k) => k >= at && candidate.trim() === shown.trim());
        at = found + 1;
        return found !== -1;
      });
    if (!inOrder) stale.push({ at: `${page}:${open + 1}`, file });
  });
  return stale;
}

/** How many ```ts and ```json blocks of `text` have no `<!-- from examples/… -->` marker right above. */
function unmarkedBlocks(text: string): number {
  return [...text.matchAll(/(<!-- from examples\/\S+ -->\n\n?)?```(?:ts|json)\n/g)].filter(
    (block) => block[1] === undefined,
  ).length;
}

/** The files of an example a quick start must show: its tsconfig and every source file but its tests. */
function appFiles(example: Example): string[] {
  const src = path.join(exampleDir(example), 'src');
  return [
    `examples/${example}/tsconfig.json`,
    ...readdirSync(src)
      .filter((name) => name.endsWith('.ts') && !name.endsWith('.test.ts'))
      .map((name) => `examples/${example}/src/${name}`),
  ].sort();
}

/** The Express quick start, whole files, lives on the Express page; the README shows its app.ts and points to it. */
const EXPRESS = '## Quick start';
const EXPRESS_PAGE = 'docs/express.md';
/** The Nest quick start, whole files, lives on the Nest page; the README points to it. */
const NEST = '## Quick start';
const NEST_PAGE = 'docs/nest.md';
/** Nest's quick start on its Fastify platform: the files that differ, and the names of those that do not. */
const NEST_FASTIFY = "## On Nest's Fastify platform";
/** The Fastify quick start, whole files, lives on the Fastify page; the README shows its app.ts and points to it. */
const FASTIFY = '## Quick start';
const FASTIFY_PAGE = 'docs/fastify.md';
/** The client example (the Express example's own test) lives on the client page, beside its jest set-up. */
const CLIENT = "## Your app's test, with jest";
/** Where the README's client example says how to run it with jest. */
const CLIENT_PAGE = 'docs/client.md';

describe('the README and docs show the examples, file by file, complete', () => {
  it('every block marked `<!-- from examples/… -->` is that whole file, exactly', () => {
    const shown = PAGES.filter((page) => existsSync(path.join(REPO_ROOT, page))).flatMap((page) =>
      shownIn(page, readFileSync(path.join(REPO_ROOT, page), 'utf8')),
    );
    expect(new Set(shown.map(({ file }) => file.split('/')[1]))).toStrictEqual(
      new Set(['express', 'nest', 'nest-fastify', 'fastify']),
    );
    expect(staleBlocks(shown)).toStrictEqual([]);
  });

  it('every block marked `<!-- excerpt of examples/… -->` is lines of that file, in order', () => {
    const pages = PAGES.filter((page) => existsSync(path.join(REPO_ROOT, page)));
    const excerpts = pages.flatMap((page) => staleExcerpts(page, readFileSync(path.join(REPO_ROOT, page), 'utf8')));
    expect(excerpts).toStrictEqual([]);
    expect(readFileSync(README, 'utf8')).toContain('<!-- excerpt of examples/express/src/app.ts -->');
    expect(readFileSync(README, 'utf8')).toContain('<!-- excerpt of examples/fastify/src/app.ts -->');
  });

  it('each quick start shows every file of its app, marks every code block, and installs every package they import', () => {
    const sections = {
      express: readmeSection(EXPRESS, EXPRESS_PAGE),
      nest: readmeSection(NEST, NEST_PAGE),
      'nest-fastify': readmeSection(NEST_FASTIFY, NEST_PAGE),
      fastify: readmeSection(FASTIFY, FASTIFY_PAGE),
    };
    // Where a file an app shares with another is shown: Nest's on Fastify shares with Nest's on Express first.
    const twins: Record<keyof typeof sections, readonly (keyof typeof sections)[]> = {
      express: [],
      nest: ['express'],
      'nest-fastify': ['nest', 'express'],
      fastify: ['express'],
    };
    const shownBy = (example: keyof typeof sections): Shown[] =>
      shownIn(sections[example].page, sections[example].text, sections[example].firstLine);
    for (const example of ['express', 'nest', 'nest-fastify', 'fastify'] as const) {
      const { text } = sections[example];
      const shown = shownBy(example);
      // A file an app shares with another (the Nest or Fastify app with the Express one, Nest's on Fastify
      // with Nest's on Express) is shown once, where the other app is; this quick start names it, and it is
      // the same file, byte for byte.
      const missing = appFiles(example).filter((file) => !shown.some((block) => block.file === file));
      const shared = missing.filter((file) => {
        const name = file.replace(`examples/${example}/`, '');
        return (
          text.includes(`\`${name}\``) &&
          twins[example].some((other) => {
            const twin = `examples/${other}/${name}`;
            return (
              shownBy(other).some((block) => block.file === twin) &&
              readFileSync(path.join(REPO_ROOT, file), 'utf8') === readFileSync(path.join(REPO_ROOT, twin), 'utf8')
            );
          })
        );
      });
      expect({ example, missing: missing.filter((file) => !shared.includes(file)) }).toStrictEqual({
        example,
        missing: [],
      });
      expect({ example, unmarked: unmarkedBlocks(text) }).toStrictEqual({ example, unmarked: 0 });
      // Every package its files import, and every package its package.json names, is installed by the
      // section's own `npm i` lines (for Express, with those of docs/client.md, which add jest).
      const installed = new Set([
        ...installedBy(text),
        ...(example === 'express' ? installedBy(readFileSync(path.join(REPO_ROOT, CLIENT_PAGE), 'utf8')) : []),
      ]);
      const files = [...shown.map(({ file }) => file), ...shared];
      const imported = files.flatMap((file) => [
        ...packagesImportedBy(readFileSync(path.join(REPO_ROOT, file), 'utf8')),
      ]);
      const manifest = readJson<Manifest>(path.join(exampleDir(example), 'package.json'));
      const needed = new Set([...imported, ...Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })]);
      expect({ example, notInstalled: [...needed].filter((name) => !installed.has(name)) }).toStrictEqual({
        example,
        notInstalled: [],
      });
    }
  });

  it("docs/client.md shows the Express example's test, and the jest set-up that runs it", () => {
    const { text, firstLine } = readmeSection(CLIENT, CLIENT_PAGE);
    expect(shownIn(CLIENT_PAGE, text, firstLine).map(({ file }) => file)).toContain('examples/express/src/app.test.ts');
    const page = readFileSync(path.join(REPO_ROOT, CLIENT_PAGE), 'utf8');
    expect(shownIn(CLIENT_PAGE, page).map(({ file }) => file)).toContain('examples/express/jest.config.json');
    const installed = new Set([...installedBy(page), ...installedBy(readmeSection(EXPRESS, EXPRESS_PAGE).text)]);
    const imported = packagesImportedBy(readFileSync(path.join(EXAMPLES, 'express', 'src', 'app.test.ts'), 'utf8'));
    expect([...imported].filter((name) => !installed.has(name))).toStrictEqual([]);
  });

  it('the checks catch a block that differs from its file, an import not installed and an unmarked block', () => {
    const file = 'examples/express/src/app.ts';
    const code = readFileSync(path.join(REPO_ROOT, file), 'utf8').replace(/\n$/, '');
    expect(staleBlocks([{ at: 'x', file, code }])).toStrictEqual([]);
    expect(staleBlocks([{ at: 'x', file, code: code.replace('mcpSubscriptions(', 'mcpSubscription(') }])).toHaveLength(
      1,
    );
    expect(staleBlocks([{ at: 'x', file, code: code.split('\n').slice(1).join('\n') }])).toHaveLength(1); // an import left out
    expect(staleBlocks([{ at: 'x', file: 'examples/express/src/gone.ts', code }])).toHaveLength(1);
    expect([...packagesImportedBy(code)].sort()).toStrictEqual([
      '@modelcontextprotocol/node',
      '@modelcontextprotocol/server',
      'express',
      'mcp-subscriptions',
    ]);
    const installed = installedBy(
      '```sh\nnpm i express@5 @modelcontextprotocol/server@^2 mcp-subscriptions\nnpm i -D @types/node\n```',
    );
    expect([...installed].sort()).toStrictEqual([
      '@modelcontextprotocol/server',
      '@types/node',
      'express',
      'mcp-subscriptions',
    ]);
    expect(() => shownIn('x.md', '<!-- from examples/express/src/app.ts -->\ntext\n')).toThrow(/not right above/);
    const marked = `<!-- from ${file} -->\n\n\`\`\`ts\n${code}\n\`\`\`\n`;
    expect(unmarkedBlocks(marked)).toBe(0);
    expect(unmarkedBlocks(`${marked}\n\`\`\`json\n{}\n\`\`\`\n`)).toBe(1);
    const excerpt = (shown: string): string => `<!-- excerpt of ${file} -->\n\n\`\`\`ts\n${shown}\n\`\`\`\n`;
    const [first, second] = code.split('\n').filter((line) => line.trim() !== '');
    expect(staleExcerpts('x', excerpt(`${first!}\n${second!}`))).toStrictEqual([]);
    expect(staleExcerpts('x', excerpt(`${second!}\n${first!}`))).toHaveLength(1); // out of order
    expect(staleExcerpts('x', excerpt('app.use(somethingElse);'))).toHaveLength(1);
  });
});
