/**
 * Bad input, fuzzed (issue #14): random and adversarial requests over real loopback HTTP against the
 * Express middleware (Express 5 and 4), and adversarial URIs and task states through real SSE
 * streams. Every request gets exactly the answer the spec's order decides (test/helpers/listen-oracle.ts):
 * a JSON-RPC error of the right code, status and id with no stack trace, or an acknowledgement of
 * exactly the validated filter, or (when it is not a listen) it goes on untouched to the host's
 * handler. After every case the server still serves a well-formed listen, no slot is left held,
 * nothing was logged as a failure, and neither realm's `Object.prototype` gained a property.
 *
 * fast-check picks the seed and prints it with the counterexample on a failure; replay one with
 * `test.prop(arbitraries, { seed, path })`.
 */
import { afterAll, beforeAll, describe, expect } from '@jest/globals';
import { fc, test } from '@fast-check/jest';
import type { IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { ErrorRequestHandler } from 'express';
import { ErrorCode, SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { isAbsoluteUri } from '../../lib/internal.ts';
import { EVERY_CAPABILITY } from '../helpers/capabilities.ts';
import { authFromUserHeader, expressFlavours, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { jsonNode, jsonText, literal, mutate, type JsonNode, type Mutation } from '../helpers/json-text.ts';
import { expectedAnswer, type Expected, type OracleServer } from '../helpers/listen-oracle.ts';
import { expectUnpolluted } from '../helpers/prototypes.ts';
import { pieces, rawPost, tricklePost, type RawAnswer, type RawRequest } from '../helpers/raw-http.ts';
import { listenBody, listenHeaders, SseParser, type SseEvent } from '../helpers/sse.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';
import { INVALID_UTF8 } from '../helpers/utf8.ts';

const LISTEN = 'subscriptions/listen';
const VERSION = '2026-07-28';
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const TASKS = 'io.modelcontextprotocol/tasks';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** Small, so that bodies past it are cheap to send; every "huge" input below stays near it. */
const LIMIT = 64 * 1024;
const SERVER: OracleServer = { maxBodyBytes: LIMIT, maxFilterEntries: 1000, protocolVersions: [VERSION], tasks: true };
const SPEC_CODES = [-32700, -32600, -32602, -32020, -32022, -32601, -32021, -32603];
/**
 * Shrinking replays a failing case over HTTP many times: past this limit fast-check stops and reports
 * the smallest counterexample so far, with its seed, before jest's timeout (60 s) would swallow it.
 */
const BOUNDED = { interruptAfterTimeLimit: 45_000, markInterruptAsFailure: true } as const;

// ---------------------------------------------------------------------------------------------------
// The servers: one per Express major, each with a hub of its own
// ---------------------------------------------------------------------------------------------------

interface Node {
  readonly name: string;
  readonly hub: SubscriptionHub;
  readonly logger: ReturnType<typeof recordingLogger>;
  readonly server: RunningServer;
  /** The last request's headers as the server saw them (Node merges duplicates). */
  seen: IncomingHttpHeaders | undefined;
  /** The last request, if the middleware handed it on to the host's handler. */
  passedOn: { body: unknown } | undefined;
  /** Errors that reached the host's error handler: a client's doing never should. */
  readonly hostErrors: unknown[];
}

const nodes: Node[] = [];
const unhandled = new UnhandledTracker();

async function startNode(flavour: (typeof expressFlavours)[number]): Promise<Node> {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger });
  const app = flavour.express();
  const node = { name: flavour.name, hub, logger, seen: undefined, passedOn: undefined, hostErrors: [] } as Omit<
    Node,
    'server'
  > & {
    server?: RunningServer;
  };
  app.post(
    '/mcp',
    (req, _res, next) => {
      node.seen = { ...req.headers };
      next();
    },
    authFromUserHeader,
    mcpSubscriptions({
      hub,
      capabilities: EVERY_CAPABILITY,
      canRead: () => true,
      canAccessTask: () => true,
      keepAliveMs: false,
      maxBodyBytes: LIMIT,
    }),
    (req, res) => {
      // The host's MCP handler, for what is not ours: 299 so that no answer of ours is mistaken for it.
      node.passedOn = { body: (req as { body?: unknown }).body };
      res.status(299).json({ passedOn: true });
    },
  );
  const onError: ErrorRequestHandler = (error, _req, res, _next) => {
    node.hostErrors.push(error);
    res.status(500).end();
  };
  app.use(onError);
  node.server = await listenOn(app);
  return node as Node;
}

beforeAll(async () => {
  unhandled.start();
  for (const flavour of expressFlavours) nodes.push(await startNode(flavour));
});

afterAll(async () => {
  unhandled.stop();
  for (const node of nodes) {
    await node.hub.close();
    await node.server.close();
  }
});

// ---------------------------------------------------------------------------------------------------
// Sending one case and checking its answer
// ---------------------------------------------------------------------------------------------------

const STANDARD_HEADERS: readonly (readonly [string, string])[] = [
  ['Content-Type', 'application/json'],
  ['Accept', 'application/json, text/event-stream'],
  ['MCP-Protocol-Version', VERSION],
  ['Mcp-Method', LISTEN],
  ['X-User', 'fuzzer'],
];

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The body (for a stream: up to and including its first event). */
  readonly text: string;
  readonly first: SseEvent | undefined;
}

async function exchange(node: Node, request: RawRequest): Promise<Answer> {
  node.seen = undefined;
  node.passedOn = undefined;
  const stream: RawAnswer = await rawPost(node.server.url, request);
  if (stream.status === 200) {
    const first = await stream.event(1);
    stream.close();
    return { status: 200, headers: stream.headers, text: first.data, first };
  }
  await stream.end();
  return { status: stream.status, headers: stream.headers, text: stream.bytes().toString('utf8'), first: undefined };
}

/** A JSON-RPC id as the wire carries it: `-0` is `0`. */
const sameId = (a: unknown, b: unknown): boolean => a === b;

function expectAnswer(node: Node, body: Buffer, answer: Answer): Expected {
  expect(node.seen).toBeDefined();
  const expected = expectedAnswer(body, node.seen!, SERVER);
  const context = { expected, status: answer.status, text: answer.text.slice(0, 2000) };
  switch (expected.kind) {
    case 'passed-on': {
      expect(context).toMatchObject({ status: 299 });
      expect(node.passedOn).toBeDefined();
      // A body the middleware read is left where express.json() leaves it; one it did not read, unread.
      if (expected.read) expect(node.passedOn!.body).toStrictEqual(expected.body);
      else expect(node.passedOn!.body).toBeUndefined();
      break;
    }
    case 'error': {
      expect(context).toMatchObject({ status: expected.status });
      expect(node.passedOn).toBeUndefined();
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      if (expected.status === 413) expect(answer.headers.connection).toBe('close');
      const message = JSON.parse(answer.text);
      expect(Object.keys(message).sort()).toStrictEqual(['error', 'id', 'jsonrpc']);
      expect(message.jsonrpc).toBe('2.0');
      expect({ id: message.id, sameId: sameId(message.id, expected.id) }).toStrictEqual({
        id: message.id,
        sameId: true,
      });
      const { code, message: text, data, ...rest } = message.error;
      expect(rest).toStrictEqual({});
      expect(Number.isInteger(code) && SPEC_CODES.includes(code)).toBe(true);
      expect(code).toBe(expected.code);
      // A message says what was wrong in one line: no stack, no path of ours.
      expect(typeof text === 'string' && text.length > 0).toBe(true);
      expect(text).not.toMatch(/\n|\bat \S+ \(|:\d+:\d+|[\\/][\w.-]+\.[cm]?[jt]s\b|node_modules/);
      if (code === -32022) {
        expect(data).toStrictEqual({ supported: [VERSION], requested: expect.any(String) });
      } else if (code === -32021) {
        expect(data).toStrictEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
      } else {
        expect(data).toBeUndefined();
      }
      break;
    }
    case 'ack': {
      expect(context).toMatchObject({ status: 200 });
      expect(answer.headers['content-type']).toBe('text/event-stream');
      expect(answer.first).toMatchObject({ event: 'message' });
      const ack = answer.first!.json;
      expect(ack).toStrictEqual({
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: {
          _meta: { [SUBSCRIPTION_ID]: ack?.params?._meta?.[SUBSCRIPTION_ID] },
          notifications: expected.notifications,
        },
      });
      expect(sameId(ack.params._meta[SUBSCRIPTION_ID], expected.id)).toBe(true);
      break;
    }
  }
  return expected;
}

let healthChecks = 0;

/** The server still serves a well-formed listen, and once its client hangs up, holds nothing. */
async function expectHealthy(node: Node): Promise<void> {
  const id = `health-${++healthChecks}`;
  const stream = await rawPost(node.server.url, {
    headers: Object.entries(listenHeaders({ 'x-user': 'health' })),
    body: Buffer.from(JSON.stringify(listenBody(id, { toolsListChanged: true }))),
    framing: 'content-length',
  });
  expect(stream.status).toBe(200);
  expect((await stream.event(1)).json.params._meta[SUBSCRIPTION_ID]).toBe(id);
  stream.close();
  await waitFor(
    () => node.hub.stats().openStreams === 0 && node.hub.stats().pendingStreams === 0,
    'every stream closed and no slot held',
  );
  expect(node.logger.errors).toStrictEqual([]);
  expect(unhandled.rejections).toStrictEqual([]);
  expect(node.hostErrors).toStrictEqual([]);
  expectUnpolluted();
}

// ---------------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------------

/** Characters that break naive framing or parsing: line ends of every kind, NUL, quotes, lone surrogates. */
const NASTY = [
  '\n',
  '\r',
  '\r\n',
  '\u2028',
  '\u2029',
  '\u0085',
  '\u0000',
  '\u001b',
  '\u007f',
  '"',
  "'",
  '\\',
  '`',
  '😀',
  '👩‍👩‍👧',
  '\ud800',
  '\udfff',
  '\ufeff',
  '\ufffd',
  ' ',
  '\t',
  'data: ',
  ': ',
  '\n\ndata: {}\n\n',
  'event: ',
  '%0A',
  '__proto__',
];
const nastyChar = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
);
const nastyString = (maxLength = 12) => fc.array(nastyChar, { maxLength }).map((parts) => parts.join(''));

const schemeArb = fc.stringMatching(/^[A-Za-z][A-Za-z0-9+.-]{0,6}$/);

/**
 * Characters the absolute-URI rule admits after the colon that are worth a frame's attention: C1
 * controls (NEL among them: not whitespace to the rule, nor a line end to SSE), lone surrogates,
 * astral characters, the replacement character, quotes the rule keeps (`'`), percent signs.
 */
const URI_TRICKY = [
  '\u0085',
  '\u0080',
  '\u009f',
  '\ud800',
  '\udbff',
  '\udc00',
  '😀',
  '\ufffd',
  "'",
  '%',
  '#',
  '[',
  ']',
  '\u200b',
  'é',
];
const uriChar = fc.oneof(
  fc.constantFrom(...URI_TRICKY),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }),
);
/** Absolute URIs with arbitrary characters that the rule still admits. */
const validUri = fc
  .tuple(schemeArb, fc.array(uriChar, { maxLength: 16 }))
  .map(([scheme, chars]) => `${scheme}:${chars.join('')}`)
  .filter(isAbsoluteUri);
/** Strings that are not absolute URIs, and URIs one refused character away from valid. */
const REFUSED_IN_URI = [
  ' ',
  '\n',
  '\r',
  '\t',
  '\u000b',
  '\f',
  '\u2028',
  '\u2029',
  '\u00a0',
  '\u3000',
  '\ufeff',
  '\u0000',
  '\u001f',
  '\u007f',
  '"',
  '<',
  '>',
  '\\',
  '^',
  '`',
  '{',
  '|',
  '}',
];
const refusedUri = fc.oneof(
  fc.tuple(validUri, fc.constantFrom(...REFUSED_IN_URI), fc.nat()).map(([uri, bad, at]) => {
    const cut = uri.indexOf(':') + 1 + (at % (uri.length - uri.indexOf(':')));
    return uri.slice(0, cut) + bad + uri.slice(cut);
  }),
  fc.constantFrom('', 'relative/path', ':no-scheme', '1abc:x', '-x:y', 'note', '/note/x', 'é:x'),
);
const uriArb = fc.oneof({ weight: 9, arbitrary: validUri }, { weight: 1, arbitrary: refusedUri });

const idArb = fc.oneof(
  fc.constantFrom<string | number>(0, '', -1, 1.5, 'listen:1', Number.MAX_SAFE_INTEGER, 1e21),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  nastyString(),
);

interface Base {
  id: string | number;
  declareTasks: boolean;
  clientInfo: boolean;
  flags: { toolsListChanged?: boolean; promptsListChanged?: boolean; resourcesListChanged?: boolean };
  /** URIs, or how many `note://many/N` to name: around the per-request bound of 1000. */
  uris: string[] | { readonly many: number } | undefined;
  taskIds: string[] | undefined;
  unknownField: string | undefined;
  /** The id's JSON text instead, when set: literals a double cannot hold, and ids of the wrong type. */
  rawId: string | undefined;
}

const manyUris = fc.record({ many: fc.integer({ min: 998, max: 1002 }) });

const baseArb: fc.Arbitrary<Base> = fc.record({
  id: idArb,
  declareTasks: fc.constantFrom(true, true, true, false),
  clientInfo: fc.boolean(),
  flags: fc.record(
    { toolsListChanged: fc.boolean(), promptsListChanged: fc.boolean(), resourcesListChanged: fc.boolean() },
    { requiredKeys: [] },
  ),
  uris: fc.option(
    fc.oneof({ weight: 9, arbitrary: fc.array(uriArb, { maxLength: 6 }) }, { weight: 1, arbitrary: manyUris }),
    { nil: undefined },
  ),
  taskIds: fc.option(fc.array(nastyString(6), { maxLength: 4 }), { nil: undefined, freq: 2 }),
  unknownField: fc.option(fc.constantFrom('futureThing', 'logging', 'toolsListChange', '__proto__'), {
    nil: undefined,
  }),
  rawId: fc.oneof(
    { weight: 5, arbitrary: fc.constant(undefined) },
    fc.constantFrom(
      '1e999',
      '-1e999',
      '-0',
      '1.0',
      '1E-400',
      '12345678901234567890123',
      'null',
      'true',
      '{}',
      '[]',
      '"\\ud800"',
    ),
  ),
});

/** A listen document as a tree, its id written as `rawId` when there is one. */
function listenTree(base: Base): JsonNode {
  const tree = jsonNode(listenDocument(base));
  if (base.rawId === undefined || tree.kind !== 'object') return tree;
  const rawId = literal(base.rawId);
  return {
    kind: 'object',
    entries: tree.entries.map((entry) => (entry.key === 'id' ? { ...entry, value: rawId } : entry)),
  };
}

function listenDocument(base: Base): Record<string, unknown> {
  const notifications: Record<string, unknown> = { ...base.flags };
  if (Array.isArray(base.uris)) notifications.resourceSubscriptions = base.uris;
  else if (base.uris !== undefined) {
    notifications.resourceSubscriptions = Array.from({ length: base.uris.many }, (_, i) => `note://many/${i}`);
  }
  if (base.taskIds !== undefined) notifications.taskIds = base.taskIds;
  if (base.unknownField !== undefined) {
    Object.defineProperty(notifications, base.unknownField, {
      value: true,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  const meta: Record<string, unknown> = {
    [VERSION_KEY]: VERSION,
    [CAPABILITIES_KEY]: base.declareTasks ? { extensions: { [TASKS]: {} } } : {},
  };
  if (base.clientInfo) meta['io.modelcontextprotocol/clientInfo'] = { name: 'fuzz', version: '1.0.0' };
  return { jsonrpc: '2.0', id: base.id, method: LISTEN, params: { _meta: meta, notifications } };
}

/** Number literals a double cannot hold, or that only look alike. */
const NUMBER_TEXT = ['-0', '1e999', '-1e999', '1E-400', '0.0', '1.0', '12345678901234567890123', '2e0', '-1'];
const scalarText = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '{}', '[]', '""', '"2.0"', `"${VERSION}"`, `"${LISTEN}"`, ...NUMBER_TEXT),
  fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.stringify(value)),
  nastyString().map((s) => JSON.stringify(s)),
  uriArb.map((uri) => JSON.stringify(uri)),
  fc.constant(JSON.stringify({ polluted: true })),
);
/** Huge strings and arrays, and nesting deeper than any recursive walk survives; all within a few times the limit. */
const hugeText = fc.oneof(
  fc.integer({ min: 10_000, max: 70_000 }).map((n) => JSON.stringify('x'.repeat(n))),
  fc.integer({ min: 1, max: 2000 }).map((n) => JSON.stringify(Array.from({ length: n }, (_, i) => i))),
  fc.integer({ min: 1, max: 30_000 }).map((n) => '['.repeat(n) + ']'.repeat(n)),
  fc.integer({ min: 1, max: 10_000 }).map((n) => '{"a":'.repeat(n) + 'null' + '}'.repeat(n)),
);
const valueNode: fc.Arbitrary<JsonNode> = fc.oneof(
  { weight: 8, arbitrary: scalarText.map(literal) },
  { weight: 1, arbitrary: hugeText.map(literal) },
);
/** Keys that reach for prototypes, or that mean something to JavaScript objects. */
const KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '__defineGetter__',
  'then',
  'length',
];
/** The request's own keys: added where one already is, a duplicate key (the last one wins in JSON.parse). */
const REQUEST_KEYS = [
  'id',
  'jsonrpc',
  'method',
  'params',
  '_meta',
  'notifications',
  VERSION_KEY,
  CAPABILITIES_KEY,
  'extensions',
  TASKS,
  'toolsListChanged',
  'resourceSubscriptions',
  'taskIds',
];
const keyArb = fc.oneof(fc.constantFrom(...KEYS), fc.constantFrom(...REQUEST_KEYS), nastyString(4));
const pollution = fc.oneof(
  fc.constant(literal('{"polluted":true}')),
  fc.constant(literal('{"prototype":{"polluted":true}}')),
  fc.constant(literal('{"__proto__":{"polluted":true}}')),
);

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: valueNode }),
  fc.record({ op: fc.constant('remove' as const), at: fc.nat() }),
  fc.record({
    op: fc.constant('add' as const),
    at: fc.nat(),
    key: keyArb,
    escaped: fc.boolean(),
    value: fc.oneof(valueNode, pollution),
  }),
  fc.record({ op: fc.constant('wrap' as const), at: fc.nat(), inArray: fc.boolean() }),
);

const framingArb = fc.record({
  framing: fc.constantFrom('content-length' as const, 'chunked' as const),
  cuts: fc.array(fc.nat({ max: 4 * LIMIT }), { maxLength: 6 }),
});
const nodeIndex = fc.nat({ max: expressFlavours.length - 1 });

// ---------------------------------------------------------------------------------------------------
// The request path
// ---------------------------------------------------------------------------------------------------

describe('the request path, fuzzed over real HTTP (Express 5 and 4)', () => {
  test.prop(
    {
      base: baseArb,
      mutations: fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
      space: fc.constantFrom('', ' ', '\n', '\t\r\n'),
      framing: framingArb,
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 600 },
  )(
    'JSON documents with wrong types at every depth, huge values, deep nests, prototype keys and duplicate keys: the answer the spec orders',
    async ({ base, mutations, space, framing, node: n }) => {
      const node = nodes[n]!;
      // Deeper levels weigh more: an envelope error masks everything below it (spec §6's order).
      const tree = mutations.reduce((doc, mutation) => mutate(doc, mutation, 'deeper'), listenTree(base));
      const body = Buffer.from(jsonText(tree, space));
      const answer = await exchange(node, { headers: STANDARD_HEADERS, body, ...framing });
      expectAnswer(node, body, answer);
      await expectHealthy(node);
    },
    60_000,
  );

  test.prop(
    {
      base: baseArb,
      damage: fc.oneof(
        fc.record({
          kind: fc.constant('insert' as const),
          at: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...INVALID_UTF8)), { minLength: 1, maxLength: 3 }),
        }),
        fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
        fc.record({ kind: fc.constant('random' as const), bytes: fc.uint8Array({ maxLength: 300 }) }),
        fc.record({ kind: fc.constantFrom('bom' as const, 'utf16' as const, 'empty' as const) }),
      ),
      framing: framingArb,
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 200 },
  )(
    'bytes that are not UTF-8 or not JSON: a clean error (or, where they decode to a valid request, its ack)',
    async ({ base, damage, framing, node: n }) => {
      const node = nodes[n]!;
      const valid = Buffer.from(
        JSON.stringify(listenDocument({ ...base, uris: Array.isArray(base.uris) ? base.uris : undefined })),
      );
      let body: Buffer;
      switch (damage.kind) {
        case 'insert': {
          body = valid;
          for (const [at, bytes] of damage.at) {
            const cut = at % (body.length + 1);
            body = Buffer.concat([body.subarray(0, cut), Buffer.from(bytes), body.subarray(cut)]);
          }
          break;
        }
        case 'truncate':
          body = valid.subarray(0, damage.at % valid.length);
          break;
        case 'random':
          body = Buffer.from(damage.bytes);
          break;
        case 'bom':
          body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), valid]);
          break;
        case 'utf16':
          body = Buffer.from(valid.toString('utf8'), 'utf16le');
          break;
        case 'empty':
          body = Buffer.alloc(0);
          break;
      }
      const answer = await exchange(node, { headers: STANDARD_HEADERS, body, ...framing });
      expectAnswer(node, body, answer);
      await expectHealthy(node);
    },
    60_000,
  );

  /** A header name as a client may spell it. */
  const spelled = (name: string) =>
    fc.constantFrom(
      name,
      name.toLowerCase(),
      name.toUpperCase(),
      name.replace(/[a-z]/g, (c, i: number) => (i % 2 ? c.toUpperCase() : c)),
    );
  /**
   * A header: mostly once with its standard value (so that the other headers decide), else absent, once
   * with a value of the pool, or twice (Node joins the values of a repeated header with `, `).
   */
  const header = (name: string, standard: string, values: readonly string[]) =>
    fc.oneof(
      { weight: 7, arbitrary: spelled(name).map((n) => [[n, standard]] as [string, string][]) },
      { weight: 1, arbitrary: fc.constant([] as [string, string][]) },
      {
        weight: 2,
        arbitrary: fc.tuple(spelled(name), fc.constantFrom(...values)).map(([n, v]) => [[n, v]] as [string, string][]),
      },
      {
        weight: 1,
        arbitrary: fc
          .tuple(
            spelled(name),
            fc.constantFrom(standard, ...values),
            spelled(name),
            fc.constantFrom(standard, ...values),
          )
          .map(
            ([n1, v1, n2, v2]) =>
              [
                [n1, v1],
                [n2, v2],
              ] as [string, string][],
          ),
      },
    );
  const CONTENT_TYPES = [
    'application/json',
    'application/json; charset=utf-8',
    'APPLICATION/JSON',
    'application/vnd.mcp+json',
    'application/json;charset=utf-16',
    'text/plain',
    'application/jsonl',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    '',
  ];
  const ACCEPTS = [
    'application/json, text/event-stream',
    'text/event-stream',
    'TEXT/EVENT-STREAM',
    'text/event-stream; charset=utf-8',
    '*/*',
    'text/*',
    'application/json',
    'text/html',
    'text/event-streams',
    'application/*',
    '',
  ];
  const VERSIONS = ['2025-06-18', '2026-07-29', 'latest', ''];
  const METHODS = ['SUBSCRIPTIONS/LISTEN', 'notifications/cancelled', 'tools/list', 'subscriptions/listen/', ''];

  test.prop(
    {
      base: baseArb,
      /** The body's protocol version: the header's (the first, when repeated), or one of the pool. */
      bodyVersion: fc.option(fc.constantFrom(...VERSIONS.filter((v) => v !== '')), { nil: undefined, freq: 2 }),
      bodyMethod: fc.constantFrom(LISTEN, LISTEN, LISTEN, 'notifications/cancelled', 'tools/list'),
      headers: fc.tuple(
        header('Content-Type', 'application/json', CONTENT_TYPES),
        header('Accept', 'application/json, text/event-stream', ACCEPTS),
        header('MCP-Protocol-Version', VERSION, VERSIONS),
        header('Mcp-Method', LISTEN, METHODS),
        fc.array(
          fc.tuple(
            fc.constantFrom('X-Junk', 'Mcp-Session-Id', 'Last-Event-ID', 'MCP-Name'),
            fc.stringMatching(/^[!-~]{0,12}$/),
          ),
          { maxLength: 2 },
        ),
      ),
      framing: framingArb,
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 300 },
  )(
    'headers absent, duplicated, in odd cases or disagreeing with the body: the answer the spec orders',
    async ({ base, bodyVersion, bodyMethod, headers, framing, node: n }) => {
      const node = nodes[n]!;
      // A body valid in itself, so that the headers decide.
      const document = listenDocument({
        ...base,
        uris: Array.isArray(base.uris) ? base.uris.filter(isAbsoluteUri) : undefined,
        taskIds: base.taskIds?.filter((taskId) => taskId !== ''),
        declareTasks: true,
      });
      document.method = bodyMethod;
      const headerVersion = headers[2][0]?.[1];
      (document.params as { _meta: Record<string, unknown> })._meta[VERSION_KEY] =
        bodyVersion ?? (headerVersion === undefined || headerVersion === '' ? VERSION : headerVersion);
      if (bodyMethod === 'notifications/cancelled') {
        delete document.id;
        document.params = { requestId: base.id };
      }
      const body = Buffer.from(JSON.stringify(document));
      const lines = [...headers.flat(), ['X-User', 'fuzzer'] as [string, string]];
      const answer = await exchange(node, { headers: lines, body, ...framing });
      expectAnswer(node, body, answer);
      await expectHealthy(node);
    },
    60_000,
  );

  test.prop(
    {
      size: fc.oneof(
        fc.constantFrom(LIMIT - 1, LIMIT, LIMIT + 1),
        fc.integer({ min: LIMIT - 48, max: LIMIT + 48 }),
        fc.integer({ min: 200, max: 4 * LIMIT }),
      ),
      id: idArb,
      framing: framingArb,
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 60 },
  )(
    `bodies up to maxBodyBytes are served; past it, 413 with Connection: close (${LIMIT} bytes)`,
    async ({ size, id, framing, node: n }) => {
      const node = nodes[n]!;
      const text = JSON.stringify(listenBody(id, { toolsListChanged: true }));
      // Padded with JSON's insignificant whitespace to exactly `size` bytes (or the bare request).
      const body = Buffer.from(text + ' '.repeat(Math.max(0, size - Buffer.byteLength(text))));
      const answer = await exchange(node, { headers: STANDARD_HEADERS, body, ...framing });
      const expected = expectAnswer(node, body, answer);
      expect(expected.kind).toBe(body.length > LIMIT ? 'error' : 'ack');
      await expectHealthy(node);
    },
    60_000,
  );
});

// ---------------------------------------------------------------------------------------------------
// Bodies that trickle in
// ---------------------------------------------------------------------------------------------------

describe('bodies that trickle in (slowloris)', () => {
  const body = (id: string) =>
    Buffer.from(JSON.stringify(listenBody(id, { toolsListChanged: true, resourceSubscriptions: ['note://slow/1'] })));
  const headers = listenHeaders({ 'x-user': 'slow' });

  /** While `trickle` is still sending, another client is served at once, and the trickler holds no slot. */
  async function othersServedMeanwhile(node: Node, done: () => boolean): Promise<void> {
    const other = await rawPost(node.server.url, {
      headers: Object.entries(listenHeaders({ 'x-user': 'other' })),
      body: Buffer.from(JSON.stringify(listenBody('other', { toolsListChanged: true }))),
      framing: 'content-length',
    });
    expect((await other.event(1, 2000)).json.method).toBe('notifications/subscriptions/acknowledged');
    expect(done()).toBe(false);
    // Reading a body costs no capacity: only the stream served is counted.
    expect(node.hub.stats()).toMatchObject({ openStreams: 1, pendingStreams: 0 });
    other.close();
  }

  test.each(expressFlavours.map((_, i) => i))(
    'byte by byte, a pause after each: the ack once the last byte is in, and others served meanwhile (node %i)',
    async (n) => {
      const node = nodes[n]!;
      const bytes = body(`slow-${n}`);
      const cuts = Array.from({ length: bytes.length }, (_, i) => i);
      let done = false;
      const trickle = tricklePost(node.server.url, headers, bytes, cuts, [2]);
      void trickle.sent.then(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 20));
      await othersServedMeanwhile(node, () => done);
      await trickle.sent;
      const answer = await trickle.answer;
      expect(answer.status).toBe(200);
      expect((await answer.event(1)).json.params).toStrictEqual({
        _meta: { [SUBSCRIPTION_ID]: `slow-${n}` },
        notifications: { toolsListChanged: true, resourceSubscriptions: ['note://slow/1'] },
      });
      answer.close();
      await expectHealthy(node);
    },
  );

  test.prop(
    {
      cuts: fc.uniqueArray(fc.nat({ max: 200 }), { minLength: 5, maxLength: 40 }),
      pauses: fc.array(fc.integer({ min: 0, max: 8 }), { minLength: 1, maxLength: 8 }),
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 8 },
  )(
    'split anywhere, with random pauses: the same ack, and others served meanwhile',
    async ({ cuts, pauses, node: n }) => {
      const node = nodes[n]!;
      const bytes = body('slow-random');
      let done = false;
      const trickle = tricklePost(node.server.url, headers, bytes, cuts, [20, ...pauses]);
      void trickle.sent.then(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 5));
      await othersServedMeanwhile(node, () => done);
      await trickle.sent;
      const answer = await trickle.answer;
      expect((await answer.event(1)).json.params.notifications).toStrictEqual({
        toolsListChanged: true,
        resourceSubscriptions: ['note://slow/1'],
      });
      answer.close();
      await expectHealthy(node);
    },
    60_000,
  );

  test.prop(
    {
      cut: fc.nat(),
      framing: fc.constantFrom('content-length' as const, 'chunked' as const),
      pauseMs: fc.integer({ min: 0, max: 20 }),
      node: nodeIndex,
    },
    { ...BOUNDED, numRuns: 20 },
  )(
    "a client that hangs up anywhere in its body: nobody's error (not the host's error handler's, not the log's), no slot held",
    async ({ cut, framing, pauseMs, node: n }) => {
      const node = nodes[n]!;
      const bytes = body('gone');
      const sent = bytes.subarray(0, cut % bytes.length);
      const closed = new Promise<void>((resolve) =>
        node.server.server.once('connection', (socket: Socket) => socket.once('close', () => resolve())),
      );
      const { port } = new URL(node.server.url);
      const client = connect(Number(port), '127.0.0.1');
      client.on('error', () => {});
      await new Promise((resolve) => client.once('connect', resolve));
      client.write(
        [
          'POST /mcp HTTP/1.1',
          'Host: 127.0.0.1',
          ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
          framing === 'chunked' ? 'Transfer-Encoding: chunked' : `Content-Length: ${bytes.length}`,
          '',
          '',
        ].join('\r\n'),
      );
      if (sent.length > 0)
        client.write(framing === 'chunked' ? `${sent.length.toString(16)}\r\n${sent.toString()}\r\n` : sent);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
      client.destroy();
      await closed;
      await new Promise((resolve) => setImmediate(resolve));
      await expectHealthy(node);
    },
    60_000,
  );

  test("a body that stops coming: the server's requestTimeout answers 408, and nothing of the hub is held", async () => {
    const logger = recordingLogger();
    const hub = new SubscriptionHub({ logger });
    const app = expressFlavours[0]!.express();
    app.post(
      '/mcp',
      authFromUserHeader,
      mcpSubscriptions({ hub, capabilities: { toolsListChanged: true }, keepAliveMs: false }),
    );
    const server = await listenOn(app, '/mcp', {
      requestTimeout: 400,
      headersTimeout: 300,
      connectionsCheckingInterval: 50,
    });
    try {
      const bytes = body('stalled');
      // Half the body, then nothing more.
      const trickle = tricklePost(server.url, headers, bytes, [bytes.length >> 1], [60_000]);
      const started = Date.now();
      const answer = await trickle.answer;
      await answer.end();
      expect({ status: answer.status, withinSeconds: Date.now() - started < 5000 }).toStrictEqual({
        status: 408,
        withinSeconds: true,
      });
      trickle.abort();
      expect(hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0, opened: 0 });
      const next = await rawPost(server.url, {
        headers: Object.entries(headers),
        body: body('after'),
        framing: 'content-length',
      });
      expect((await next.event(1)).json.params._meta[SUBSCRIPTION_ID]).toBe('after');
      next.close();
      expect(logger.errors).toStrictEqual([]);
    } finally {
      await server.close();
      await hub.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------------
// The SSE output
// ---------------------------------------------------------------------------------------------------

/** JSON values that survive JSON unchanged (no `-0`), for task results. */
const stableJson = fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown);
const STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;
const taskArb = fc
  .record(
    {
      taskId: nastyString(8).filter((id) => id !== ''),
      status: fc.constantFrom(...STATUSES),
      statusMessage: nastyString(24),
      createdAt: fc.constant('2026-07-28T00:00:00.000Z'),
      lastUpdatedAt: fc.constant('2026-07-28T00:00:01.000Z'),
      ttlMs: fc.option(fc.nat(), { nil: null }),
      pollIntervalMs: fc.nat(),
      result: stableJson,
      error: fc.record({ code: fc.integer(), message: nastyString(16) }, { noNullPrototype: true }),
      _meta: fc.constant({ 'io.modelcontextprotocol/related-task': 'leaks?' }),
    },
    { requiredKeys: ['taskId', 'status', 'createdAt', 'lastUpdatedAt', 'ttlMs'], noNullPrototype: true },
  )
  .chain((task) =>
    fc.dictionary(nastyString(5), stableJson, { maxKeys: 3, noNullPrototype: true }).map((extra) => {
      // Extra fields of the state, adversarial keys included; `_meta` and the required fields are the
      // state's own.
      const state: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(extra)) {
        if (!Object.hasOwn(task, key) && key !== '_meta')
          Object.defineProperty(state, key, { value, enumerable: true, writable: true, configurable: true });
      }
      return Object.assign(state, task);
    }),
  );

type Publish =
  | { readonly kind: 'uri'; readonly index: number }
  | { readonly kind: 'task'; readonly index: number }
  | { readonly kind: 'tools' };

/** Checks the bytes of a whole stream strictly: UTF-8, `\n` line ends only, and every event exactly `event: message` then one `data:` line. */
function strictFrames(bytes: Buffer): string[] {
  const text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  expect(text).not.toContain('\r');
  expect(text.endsWith('\n\n')).toBe(true);
  const frames = text.slice(0, -2).split('\n\n');
  return frames.map((frame) => {
    const lines = frame.split('\n');
    expect({ frame, lines: lines.length, event: lines[0], data: lines[1]?.startsWith('data: ') }).toStrictEqual({
      frame,
      lines: 2,
      event: 'event: message',
      data: true,
    });
    return lines[1]!.slice('data: '.length);
  });
}

describe('the SSE output, fuzzed', () => {
  let sse: { hub: SubscriptionHub; server: RunningServer; logger: ReturnType<typeof recordingLogger> };
  beforeAll(async () => {
    const logger = recordingLogger();
    const hub = new SubscriptionHub({ logger });
    const app = expressFlavours[0]!.express();
    app.post(
      '/mcp',
      authFromUserHeader,
      mcpSubscriptions({
        hub,
        capabilities: { toolsListChanged: true, resourceSubscriptions: true, tasks: true },
        canRead: () => true,
        canAccessTask: () => true,
        keepAliveMs: false,
      }),
    );
    sse = { hub, logger, server: await listenOn(app) };
  });
  afterAll(async () => {
    await sse.hub.close();
    await sse.server.close();
  });

  test.prop(
    {
      id: idArb,
      uris: fc.uniqueArray(validUri, { minLength: 1, maxLength: 6 }),
      duplicate: fc.boolean(),
      tasks: fc.uniqueArray(taskArb, { maxLength: 4, selector: (task) => task.taskId }),
      order: fc.array(
        fc.oneof(
          fc.record({ kind: fc.constant('uri' as const), index: fc.nat() }),
          fc.record({ kind: fc.constant('task' as const), index: fc.nat() }),
          fc.constant({ kind: 'tools' as const }),
        ),
        { minLength: 1, maxLength: 12 },
      ),
      cuts: fc.array(fc.nat({ max: 20_000 }), { maxLength: 30 }),
    },
    { ...BOUNDED, numRuns: 150 },
  )(
    'whatever a URI, a task id or a task state contains, every frame is one data line whose JSON round-trips exactly',
    async ({ id, uris, duplicate, tasks, order, cuts }) => {
      const requested = duplicate ? [...uris, uris[0]!] : uris;
      const taskIds = tasks.map((task) => task.taskId);
      const notifications = {
        toolsListChanged: true,
        resourceSubscriptions: requested,
        ...(taskIds.length > 0 ? { taskIds } : {}),
      };
      const stream = await rawPost(sse.server.url, {
        headers: Object.entries(listenHeaders({ 'x-user': 'sse' })),
        body: Buffer.from(
          JSON.stringify(listenBody(id, notifications, { [CAPABILITIES_KEY]: { extensions: { [TASKS]: {} } } })),
        ),
        framing: 'content-length',
      });
      expect(stream.status).toBe(200);
      await stream.event(1);
      const wire = JSON.parse(JSON.stringify(id)) as string | number;
      const meta = { [SUBSCRIPTION_ID]: wire };
      const expected: unknown[] = [
        {
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: {
            _meta: meta,
            notifications: {
              toolsListChanged: true,
              resourceSubscriptions: uris,
              ...(taskIds.length > 0 ? { taskIds } : {}),
            },
          },
        },
      ];
      for (const step of order as Publish[]) {
        if (step.kind === 'uri') {
          const uri = uris[step.index % uris.length]!;
          sse.hub.resourceUpdated(uri);
          expected.push({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri, _meta: meta } });
        } else if (step.kind === 'task' && tasks.length > 0) {
          const task = tasks[step.index % tasks.length]!;
          sse.hub.taskStatus(task, 'sse');
          const { _meta: _dropped, ...state } = task;
          expected.push({ jsonrpc: '2.0', method: 'notifications/tasks', params: { ...state, _meta: meta } });
        } else if (step.kind === 'tools') {
          sse.hub.toolsListChanged();
          expected.push({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params: { _meta: meta } });
        }
      }
      await sse.hub.complete();
      await stream.end();
      expected.push({ jsonrpc: '2.0', id: wire, result: { resultType: 'complete', _meta: meta } });

      const bytes = stream.bytes();
      const data = strictFrames(bytes);
      // The same bytes through the WHATWG parser, split anywhere (inside a line, inside a character).
      const events: SseEvent[] = [];
      const parser = new SseParser((event) => events.push(event));
      for (const piece of pieces(bytes, cuts)) parser.feed(piece);
      expect(events.map((event) => event.data)).toStrictEqual(data);
      expect(events.map((event) => event.event)).toStrictEqual(data.map(() => 'message'));
      expect(events.map((event) => event.json)).toStrictEqual(expected);
      // And each is JSON as JSON.stringify writes it: no duplicate key, no whitespace (key order aside,
      // which leaves the length alone).
      expect(data.map((json) => JSON.stringify(JSON.parse(json)).length)).toStrictEqual(
        data.map((json) => json.length),
      );
      expect(sse.logger.errors).toStrictEqual([]);
    },
    60_000,
  );

  test.prop([refusedUri], { numRuns: 300 })(
    'a URI the rule refuses can never reach a frame: the rule says no, and the hub throws at publish',
    (uri) => {
      expect(isAbsoluteUri(uri)).toBe(false);
      expect(() => sse.hub.resourceUpdated(uri)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidEvent }));
    },
  );
});
