/**
 * Black-box harness for the sample apps: spawns one as a child process exactly as `npm start` would,
 * waits for its `listening on http://HOST:PORT/mcp` line, and talks to it over real HTTP on loopback.
 * Nothing here imports the app's code: the sample apps' contract (docs/sample-app.md) is the only thing
 * the suites rely on.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { bearer } from './bearer.ts';
import { freePort } from './free-port.ts';
import { PG_URL } from './postgres.ts';
import { SseParser, type SseEvent } from './sse.ts';

/** The repository root: the samples are started from there, as `npm start` does. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The hosts that serve the contract: the Express sample, the Nest sample on Nest's Express platform and
 * on its Fastify platform (`NEST_PLATFORM=fastify`), the plain Fastify sample, and the Hono sample.
 */
export type SampleKind = 'express' | 'nest' | 'nest-fastify' | 'fastify' | 'hono';

/** How each host is started, and the host its `listening on` line names in parentheses. */
interface SampleHost {
  /** The folder under sample-app/ whose `main.ts` starts it. */
  readonly folder: string;
  /** Its npm script. */
  readonly script: string;
  /** What the environment adds to start this host rather than another one of the same folder. */
  readonly env: Readonly<Record<string, string>>;
  /** The host the contract's startup line names: `(express)`, `(nest on express)`, … */
  readonly host: string;
}

const HOSTS: Readonly<Record<SampleKind, SampleHost>> = {
  express: { folder: 'express', script: 'start', env: {}, host: 'express' },
  nest: { folder: 'nest', script: 'start:nest', env: {}, host: 'nest on express' },
  'nest-fastify': {
    folder: 'nest',
    script: 'start:nest',
    env: { NEST_PLATFORM: 'fastify' },
    host: 'nest on fastify',
  },
  fastify: { folder: 'fastify', script: 'start:fastify', env: {}, host: 'fastify' },
  hono: { folder: 'hono', script: 'start:hono', env: {}, host: 'hono' },
};

/** Every host that serves the contract, in the order the suites run them. */
export const SAMPLE_KINDS: readonly SampleKind[] = Object.freeze(Object.keys(HOSTS) as SampleKind[]);

/** The host a sample's startup line names (`listening on http://…/mcp (HOST)`). */
export function sampleHost(kind: SampleKind): string {
  return HOSTS[kind].host;
}

/**
 * The hosts a suite runs against: `all` (by default every host), narrowed by the `SAMPLE_KINDS`
 * environment variable when it is set (`SAMPLE_KINDS=express,fastify`, CONTRIBUTING.md). A name that
 * is no host throws, naming the known ones: a typo must not select nothing and pass.
 */
export function selectedSampleKinds(
  all: readonly SampleKind[] = SAMPLE_KINDS,
  env: Readonly<Record<string, string | undefined>> = process.env,
): SampleKind[] {
  const raw = env['SAMPLE_KINDS']?.trim();
  if (raw === undefined || raw === '') return [...all];
  const wanted = raw.split(',').map((name) => name.trim());
  const unknown = wanted.filter((name) => !Object.hasOwn(HOSTS, name));
  if (unknown.length > 0) {
    throw new Error(
      `SAMPLE_KINDS: unknown host(s) ${unknown.map((name) => JSON.stringify(name)).join(', ')}; expected a comma-separated list of ${SAMPLE_KINDS.join(', ')}`,
    );
  }
  return all.filter((kind) => wanted.includes(kind));
}

/**
 * The command line that starts `kind` the way its npm script does, without npm: `node
 * --conditions=mcp-subscriptions-source --import tsx sample-app/<folder>/main.ts`, and the variables
 * that select the host (`NEST_PLATFORM`), to add to the child's environment.
 */
export function sampleCommand(kind: SampleKind): {
  readonly command: string;
  readonly args: string[];
  readonly env: Readonly<Record<string, string>>;
} {
  const { folder, env } = HOSTS[kind];
  return {
    command: process.execPath,
    args: ['--conditions=mcp-subscriptions-source', '--import', 'tsx', `sample-app/${folder}/main.ts`],
    env,
  };
}

/** The contract's bound from SIGTERM or SIGINT to the sample's exit: the bound every test holds. */
export const CONTRACT_EXIT_MS = 5000;

/** The protocol revision the samples serve. */
export const PROTOCOL_VERSION = '2026-07-28';

/** The contract's tokens, by principal. */
export const TOKENS = { alice: 'alice-token', bob: 'bob-token', carol: 'carol-token' } as const;

/** The answer of a REST or MCP call. */
export interface HttpAnswer {
  status: number;
  headers: Headers;
  /** The raw body. */
  text: string;
  /** The body parsed as JSON, or `undefined` when it is not JSON. */
  body: any;
}

/** The answer of an MCP JSON-RPC request: the HTTP answer plus the JSON-RPC response for its id. */
export interface McpAnswer extends HttpAnswer {
  /** The JSON-RPC response with the request's id (from a JSON body or an SSE body), if any. */
  message: any;
}

/** A running sample app. */
export interface SampleApp {
  readonly kind: SampleKind;
  /**
   * The host the startup line names in parentheses (`express`, `nest on express`, `nest on fastify`,
   * `fastify`); `undefined` only for a release whose samples name none (see `StartOptions.root`).
   */
  readonly host: string | undefined;
  /** The MCP endpoint, from the startup line: `http://127.0.0.1:PORT/mcp`. */
  readonly url: string;
  /** `http://127.0.0.1:PORT`. */
  readonly baseUrl: string;
  readonly child: ChildProcess;
  /** Everything the child printed so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code (or `null` when killed by a signal) once the child has exited. */
  readonly exited: Promise<number | null>;
  /**
   * Sends `signal` (SIGTERM by default) and resolves with the exit code. Rejects when the child has not
   * exited within `timeoutMs` (default: the contract's own 5 s; it is then SIGKILLed), with its stderr
   * in the message.
   */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
  /** A REST call on this app (see {@link api}). */
  api(token: string | undefined, method: string, route: string, body?: unknown): Promise<HttpAnswer>;
  /** An MCP JSON-RPC request on this app (see {@link mcpRequest}). */
  mcp(
    token: string | undefined,
    method: string,
    params?: Record<string, any>,
    options?: McpOptions,
  ): Promise<McpAnswer>;
}

const running = new Set<ChildProcess>();

process.once('exit', () => {
  // Last resort: a child left behind would keep its port and outlive the test run.
  for (const child of running) child.kill('SIGKILL');
});

/** Variables of the parent environment that would change a sample's behaviour: never inherited. */
const CONTRACT_VARIABLES = [
  'PORT',
  'HOST',
  'KEEPALIVE_MS',
  'MAX_SUBSCRIPTIONS',
  'MAX_SUBSCRIPTIONS_PER_PRINCIPAL',
  'STALL_TIMEOUT_MS',
  'MAX_BUFFER',
  'REDIS_URL',
  'REDIS_CLUSTER',
  'DATABASE_URL',
  'MCP_CONFORMANCE',
  'METRICS_PORT',
  'MAX_STREAM_DURATION_MS',
  'DRAIN_MS',
  'NEST_PLATFORM',
  'NODE_TEST_CONTEXT',
];

/** The startup line; the host in parentheses since the contract asked for it (the first release's samples print none). */
const LISTENING = /^listening on (http:\/\/([^/\s]+))\/mcp(?: \(([^)\n]+)\))?\s*$/m;

/** Options of {@link startSample}. */
export interface StartOptions {
  /** How long the sample may take to print its `listening on` line. @default 30000 */
  startTimeoutMs?: number;
  /**
   * Start it with its npm script (`npm start`, `npm run start:nest`, `npm run start:fastify`), signals
   * and all, as a user does. @default false
   */
  viaNpm?: boolean;
  /**
   * The source tree to start it from: another release's (see first-release.ts), whose own
   * `package.json` makes `mcp-subscriptions` resolve to that release's sources. @default REPO_ROOT
   */
  root?: string;
}

/**
 * Starts a sample app the way its npm script does (`node --conditions=mcp-subscriptions-source
 * --import tsx sample-app/<folder>/main.ts` from the repo root, or from `root`, with `NEST_PLATFORM=fastify`
 * for `nest-fastify`) with `PORT=0` and `HOST=127.0.0.1`, plus `env` (an `undefined` value unsets a
 * variable, to exercise its default). Resolves once it printed its `listening on` line; rejects when
 * that line names another host than `kind`'s (or, from this tree, none), so that no test passes
 * against the wrong host.
 */
export function startSample(
  kind: SampleKind,
  env: Record<string, string | undefined> = {},
  { startTimeoutMs = 30_000, viaNpm = false, root = REPO_ROOT }: StartOptions = {},
): Promise<SampleApp> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const name of CONTRACT_VARIABLES) delete childEnv[name];
  const direct = sampleCommand(kind);
  Object.assign(childEnv, { PORT: '0', HOST: '127.0.0.1' }, direct.env);
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[name];
    else childEnv[name] = value;
  }
  const expectedHost = sampleHost(kind);
  // viaNpm: exactly the README's command (`npm start`), signals included, as a user runs it.
  const [command, args] = viaNpm ? ['npm', ['run', '--silent', HOSTS[kind].script]] : [direct.command, direct.args];
  const child = spawn(command, args, {
    cwd: root,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      running.delete(child);
      resolve(code);
    });
  });

  return new Promise<SampleApp>((resolve, reject) => {
    let settled = false;
    const fail = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`sample-app/${kind}: ${why}\n--- stdout ---\n${out}\n--- stderr ---\n${err}`));
    };
    const timer = setTimeout(() => fail(`no "listening on" line within ${startTimeoutMs} ms`), startTimeoutMs);
    child.once('error', (error) => fail(`could not spawn: ${error.message}`));
    void exited.then((code) => fail(`exited with code ${code} before listening`));
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const match = LISTENING.exec(out);
      if (match === null || settled) return;
      const host = match[3];
      if (host !== expectedHost && (host !== undefined || root === REPO_ROOT)) {
        fail(
          `its "listening on" line names the host ${JSON.stringify(host ?? null)}, not ${JSON.stringify(expectedHost)}`,
        );
        return;
      }
      settled = true;
      clearTimeout(timer);
      const baseUrl = match[1]!;
      const url = `${baseUrl}/mcp`;
      resolve({
        kind,
        host,
        url,
        baseUrl,
        child,
        stdout: () => out,
        stderr: () => err,
        exited,
        stop: (signal = 'SIGTERM', timeoutMs = CONTRACT_EXIT_MS) =>
          stopChild(child, exited, signal, timeoutMs, () => err),
        api: (token, method, route, body) => api(baseUrl, token, method, route, body),
        mcp: (token, method, params, options) => mcpRequest(url, token, method, params, options),
      });
    });
  });
}

async function stopChild(
  child: ChildProcess,
  exited: Promise<number | null>,
  signal: NodeJS.Signals,
  timeoutMs: number,
  stderr: () => string,
): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return exited;
  child.kill(signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the sample did not exit within ${timeoutMs} ms of ${signal}\n--- stderr ---\n${stderr()}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Kills every child this module started that is still running (samples, redis-server), for `after()`. */
export async function stopAllSamples(): Promise<void> {
  const children = [...running];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) {
            resolve();
            return;
          }
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

async function answer(response: Response): Promise<HttpAnswer> {
  const text = await response.text();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

/**
 * A REST call: `method route` on `baseUrl` with `Authorization: Bearer <token>` (none when `token`
 * is `undefined`). An object `body` is sent as JSON; a string is sent verbatim as `application/json`.
 */
export async function api(
  baseUrl: string,
  token: string | undefined,
  method: string,
  route: string,
  body?: unknown,
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { ...bearer(token) };
  let payload: string | undefined;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  return answer(await fetch(new URL(route, baseUrl), { method, headers, body: payload }));
}

/**
 * Writes the note `uri` (`note://<owner>/<name>`) as the holder of `token`, through the notes route
 * (`PUT /api/notes/<owner>/<name>`): 201 when it created the note on this instance, 200 when it updated it.
 */
export function putNote(
  app: Pick<SampleApp, 'api'>,
  token: string | undefined,
  uri: string,
  text: string,
): Promise<HttpAnswer> {
  return app.api(token, 'PUT', `/api/notes/${uri.slice('note://'.length)}`, { text });
}

/** Options of {@link mcpRequest}. */
export interface McpOptions {
  /** The JSON-RPC id. @default a fresh number */
  id?: string | number;
  /** Headers to add or override (lower-case names); `null` removes one. */
  headers?: Record<string, string | null>;
  /** Client capabilities in `_meta`. @default {} */
  clientCapabilities?: Record<string, unknown>;
}

/** The methods whose `Mcp-Name` header mirrors a body field (SEP-2243). */
const NAME_SOURCE: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
};

let nextId = 1;

/**
 * An MCP request the way a 2026-07-28 client sends one: the standard headers (`Content-Type`,
 * `Accept`, `MCP-Protocol-Version`, `Mcp-Method`, and `Mcp-Name` where the method mirrors one) and the
 * `_meta` envelope (protocol version and client capabilities). Reads a JSON or an SSE answer and
 * picks the JSON-RPC response with the request's id.
 */
export async function mcpRequest(
  url: string,
  token: string | undefined,
  method: string,
  params: Record<string, any> = {},
  options: McpOptions = {},
): Promise<McpAnswer> {
  const id = options.id ?? nextId++;
  const { _meta: meta, ...rest } = params;
  const body = {
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...rest,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': options.clientCapabilities ?? {},
        ...(meta as Record<string, unknown> | undefined),
      },
    },
  };
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
    ...bearer(token),
  };
  const nameField = NAME_SOURCE[method];
  if (nameField !== undefined && typeof rest[nameField] === 'string') headers['mcp-name'] = rest[nameField];
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value === null) delete headers[name];
    else headers[name] = value;
  }
  const result = await answer(await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) }));
  let message: any = result.body;
  if ((result.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const events: SseEvent[] = [];
    new SseParser((event) => events.push(event)).feed(result.text + '\n\n');
    message = events.map((event) => event.json).find((json) => json?.id === id && !('method' in json));
  }
  return { ...result, message };
}

/**
 * Waits until `probe()` resolves to a truthy value, trying again every `intervalMs`, and returns that
 * value; rejects after `timeoutMs` with `what` and the last value seen.
 */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  what: string,
  { timeoutMs = 5000, intervalMs = 25 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** A throwaway Redis server for the `REDIS_URL` rows. */
export interface RedisServer {
  /** `redis://127.0.0.1:PORT`. */
  readonly url: string;
  /** Its port, to start a redis-server on the same one after this one stopped. */
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on a free loopback port, without persistence, or resolves `undefined` when it
 * is not installed. Resolves once it accepts connections.
 */
export async function startRedis({
  startTimeoutMs = 10_000,
  port: wanted,
}: { startTimeoutMs?: number; port?: number } = {}): Promise<RedisServer | undefined> {
  const port = wanted ?? (await freePort());
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const spawned = await new Promise<boolean>((resolve) => {
    child.once('spawn', () => resolve(true));
    child.once('error', () => resolve(false));
  });
  if (!spawned) return undefined;
  running.add(child);
  void exited.then(() => running.delete(child));
  const deadline = Date.now() + startTimeoutMs;
  while (!/ready to accept connections/i.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not start on port ${port}:\n${out}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Runs `test` with a redis-server of its own ({@link startRedis}), stopped once `test` is done, whatever
 * its outcome. A test that needs Redis fails, rather than skips, when redis-server cannot be started.
 */
export async function withOwnRedis<T>(test: (redis: RedisServer) => Promise<T>): Promise<T> {
  const redis = await startRedis();
  if (redis === undefined) throw new Error('redis-server could not be started');
  try {
    return await test(redis);
  } finally {
    await redis.stop();
  }
}

/** One statement on the shared PostgreSQL (test/helpers/postgres.ts), on a connection of its own. */
async function sharedPostgres(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Creates database `name` on the shared PostgreSQL and returns its URL: the `DATABASE_URL` of samples
 * that must hear no other suite's notifications (LISTEN/NOTIFY channels are per database).
 */
export async function createDatabase(name: string): Promise<string> {
  await sharedPostgres(`CREATE DATABASE "${name}"`);
  return PG_URL.replace(/\/test$/, `/${name}`);
}

/** Drops database `name` of the shared PostgreSQL, ending whatever session is still on it. */
export async function dropDatabase(name: string): Promise<void> {
  await sharedPostgres(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

/** POSTs `notifications/cancelled` for listen `id` as the holder of `token` (spec §4); the raw answer. */
export function postCancel(app: Pick<SampleApp, 'url'>, token: string, id: string | number): Promise<Response> {
  return fetch(app.url, {
    method: 'POST',
    headers: {
      ...bearer(token),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL_VERSION,
      'mcp-method': 'notifications/cancelled',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      method: 'notifications/cancelled',
      params: {
        requestId: id,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
}
