/**
 * The listen client (`mcp-subscriptions/client`) against a raw `node:http` server that each test
 * scripts byte by byte: the request it sends, every way a listen can fail before its acknowledgement,
 * the buffer's policies, the end reasons, `close()`, the caller's signal, `waitFor()`, and
 * re-listening with backoff, `Retry-After` and the `gap` marker. Real sockets on loopback, real SSE
 * bytes; delays are a few milliseconds, and timing is asserted with generous bounds only.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode, hasErrorCode } from 'mcp-subscriptions';
import {
  listen,
  type ListenError,
  type ListenSubscription,
  type SubscriptionItem,
  type WaitForError,
} from 'mcp-subscriptions/client';
import { ItemQueue } from '../../adapters/client/item-queue.ts';
import { backoffDelay, parseRetryAfter } from '../../adapters/client/retry.ts';
import { thrown } from '../helpers/assert.ts';
import { freePort } from '../helpers/free-port.ts';
import { expectOptionsError } from '../helpers/options.ts';

const ACK = 'notifications/subscriptions/acknowledged';
const TOOLS = 'notifications/tools/list_changed';
const PROMPTS = 'notifications/prompts/list_changed';
const UPDATED = 'notifications/resources/updated';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** One listen request as the server received it. */
interface Exchange {
  readonly n: number;
  readonly at: number;
  readonly req: http.IncomingMessage;
  readonly res: http.ServerResponse;
  readonly body: any;
  readonly text: string;
  /** Resolves when the client has gone (its connection closed). */
  readonly gone: Promise<void>;
}

type Script = (exchange: Exchange) => void;

const frame = (message: unknown): string => `event: message\ndata: ${JSON.stringify(message)}\n\n`;
const ackFrame = (id: unknown, honored: Record<string, unknown>): string =>
  frame({ jsonrpc: '2.0', method: ACK, params: { _meta: { [SUBSCRIPTION_ID]: id }, notifications: honored } });
const noteFrame = (id: unknown, method: string, params: Record<string, unknown> = {}): string =>
  frame({ jsonrpc: '2.0', method, params: { ...params, _meta: { [SUBSCRIPTION_ID]: id } } });
const resultFrame = (id: unknown): string =>
  frame({ jsonrpc: '2.0', id, result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: id } } });

function openStream(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform' });
  res.flushHeaders();
}

/** Acknowledges with `honored`, then writes `after` (frames) in the same chunk. */
function acknowledge(exchange: Exchange, honored: Record<string, unknown>, after = ''): void {
  openStream(exchange.res);
  exchange.res.write(ackFrame(exchange.body.id, honored) + after);
}

function refuse(
  exchange: Exchange,
  status: number,
  code: number,
  message: string,
  extra: { data?: unknown; headers?: Record<string, string> } = {},
): void {
  const error = extra.data === undefined ? { code, message } : { code, message, data: extra.data };
  exchange.res.writeHead(status, { 'content-type': 'application/json', ...extra.headers });
  exchange.res.end(JSON.stringify({ jsonrpc: '2.0', id: exchange.body.id, error }));
}

/** The server every test scripts: each listen request goes to `script`, numbered from 1. */
const server = {
  http: undefined as http.Server | undefined,
  url: '',
  script: ((exchange) => acknowledge(exchange, { toolsListChanged: true })) as Script,
  exchanges: [] as Exchange[],
  /** TCP connections accepted. */
  connections: 0,
};

beforeAll(async () => {
  server.http = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (text += chunk));
    req.on('end', () => {
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      const gone = new Promise<void>((resolve) => res.once('close', () => resolve()));
      const exchange: Exchange = { n: server.exchanges.length + 1, at: Date.now(), req, res, body, text, gone };
      server.exchanges.push(exchange);
      server.script(exchange);
    });
  });
  server.http.on('connection', () => (server.connections += 1));
  await new Promise<void>((resolve) => server.http!.listen(0, '127.0.0.1', () => resolve()));
  server.url = `http://127.0.0.1:${(server.http.address() as AddressInfo).port}/mcp`;
});

const open: ListenSubscription[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((subscription) => subscription.close()));
  for (const { res } of server.exchanges.splice(0)) res.destroy();
  server.script = (exchange) => acknowledge(exchange, { toolsListChanged: true });
});

afterAll(async () => {
  server.http?.closeAllConnections();
  await new Promise((resolve) => server.http?.close(resolve));
});

/** `listen()` on the scripted server, closed after the test. */
async function subscribe(...args: Partial<Parameters<typeof listen>>): Promise<ListenSubscription> {
  const subscription = await listen(args[0] ?? server.url, args[1] ?? { toolsListChanged: true }, args[2]);
  open.push(subscription);
  return subscription;
}

/** The rejection of `promise`, which must reject. */
async function rejection<T = ListenError>(promise: Promise<unknown>): Promise<T> {
  try {
    await promise;
  } catch (error) {
    return error as T;
  }
  throw new Error('expected a rejection');
}

/** Every item until the end (the subscription must end). */
async function drain(subscription: ListenSubscription): Promise<SubscriptionItem[]> {
  const items: SubscriptionItem[] = [];
  for await (const item of subscription) items.push(item);
  return items;
}

/** Items as short lines: `notification <method> <uri?>`, `dropped 2`, `gap lost`, `end complete`. */
function lines(items: readonly SubscriptionItem[]): string[] {
  return items.map((item) => {
    switch (item.type) {
      case 'notification':
        return typeof item.params.uri === 'string' ? `${item.method} ${item.params.uri}` : item.method;
      case 'dropped':
        return `dropped ${item.count}`;
      case 'gap':
        return `gap ${item.reason}`;
      case 'end':
        return `end ${item.reason}`;
    }
  });
}

const updates = (id: unknown, from: number, to: number): string =>
  Array.from({ length: to - from + 1 }, (_, i) => noteFrame(id, UPDATED, { uri: `note://x/${from + i}` })).join('');

describe('the request', () => {
  test('is the spec’s: POST, its four headers and the caller’s, the body with `_meta`, a fresh string id', async () => {
    const filter = { toolsListChanged: true, resourceSubscriptions: ['note://alice/a'] };
    await subscribe(server.url, filter, { headers: { Authorization: 'Bearer alice-token', 'X-Trace': 't-1' } });
    await subscribe(server.url, filter);
    const [first, second] = server.exchanges;
    expect(first!.req.method).toBe('POST');
    expect(first!.req.url).toBe('/mcp');
    expect(first!.req.headers).toMatchObject({
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'subscriptions/listen',
      authorization: 'Bearer alice-token',
      'x-trace': 't-1',
    });
    expect(first!.req.headers['mcp-session-id']).toBe(undefined);
    expect(first!.body).toStrictEqual({
      jsonrpc: '2.0',
      id: expect.stringMatching(/^listen-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
      method: 'subscriptions/listen',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
        },
        notifications: filter,
      },
    });
    expect(second!.body.id).not.toBe(first!.body.id);
    expect(second!.req.headers.authorization).toBe(undefined);
  });

  test('declares the Tasks extension when taskIds are asked, beside the caller’s capabilities; takes 0 as an id', async () => {
    await subscribe(server.url, { taskIds: ['t-1'] }, { id: 0 });
    await subscribe(server.url, { taskIds: [] }, { clientCapabilities: { extensions: { 'example.com/x': {} }, y: 1 } });
    await subscribe(server.url, { toolsListChanged: true }, { clientCapabilities: { y: 1 } });
    const capabilities = server.exchanges.map((e) => e.body.params._meta['io.modelcontextprotocol/clientCapabilities']);
    expect(server.exchanges[0]!.body.id).toBe(0);
    expect(capabilities).toStrictEqual([
      { extensions: { 'io.modelcontextprotocol/tasks': {} } },
      { extensions: { 'example.com/x': {}, 'io.modelcontextprotocol/tasks': {} }, y: 1 },
      { y: 1 },
    ]);
  });

  test('calls a headers() function before each attempt', async () => {
    let calls = 0;
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true });
      if (exchange.n === 1) exchange.res.end(); // lost
    };
    const subscription = await subscribe(server.url, undefined, {
      headers: () => ({ authorization: `Bearer token-${++calls}` }),
      reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
    });
    expect(
      lines([
        await subscription[Symbol.asyncIterator]()
          .next()
          .then((r) => r.value!),
      ]),
    ).toStrictEqual(['gap lost']);
    expect(server.exchanges.map((e) => e.req.headers.authorization)).toStrictEqual([
      'Bearer token-1',
      'Bearer token-2',
    ]);
  });
});

describe('before the acknowledgement', () => {
  test('a JSON-RPC error answer rejects with ListenRefused, its HTTP status, JSON-RPC code and data', async () => {
    server.script = (exchange) =>
      refuse(exchange, 400, -32022, 'Unsupported protocol version', {
        data: { supported: ['2026-07-28'], requested: '2026-07-28' },
      });
    const error = await rejection(listen(server.url, { toolsListChanged: true }, { id: 'r-1' }));
    expect(error).toMatchObject({
      name: 'ListenError',
      code: ErrorCode.ListenRefused,
      id: 'r-1',
      status: 400,
      rpcCode: -32022,
      data: { supported: ['2026-07-28'], requested: '2026-07-28' },
      retryAfterMs: undefined,
    });
    expect(error.message).toBe(
      'mcp-subscriptions: listen was refused: HTTP 400 Bad Request, JSON-RPC -32022 "Unsupported protocol version"',
    );
  });

  test('a 503 carries its Retry-After, in seconds or as an HTTP date', async () => {
    server.script = (exchange) =>
      refuse(exchange, 503, -32603, 'Subscription limit reached', { headers: { 'retry-after': '7' } });
    const seconds = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(seconds).toMatchObject({ code: ErrorCode.ListenRefused, status: 503, rpcCode: -32603, retryAfterMs: 7000 });
    const date = new Date(Date.now() + 30_000).toUTCString();
    server.script = (exchange) => refuse(exchange, 503, -32603, 'closing', { headers: { 'retry-after': date } });
    const dated = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(dated.retryAfterMs).toBeGreaterThan(20_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(30_000);
  });

  test('an HTTP error that is not JSON-RPC (the host’s 401) rejects with its status and body', async () => {
    server.script = ({ res }) => {
      res.writeHead(401, { 'www-authenticate': 'Bearer', 'content-type': 'text/plain' });
      res.end('Unauthorized: no token');
    };
    const error = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(error).toMatchObject({
      code: ErrorCode.ListenRefused,
      status: 401,
      rpcCode: undefined,
      body: 'Unauthorized: no token',
    });
    expect(error.message).toBe('mcp-subscriptions: listen was refused: HTTP 401 Unauthorized: Unauthorized: no token');
  });

  test('a JSON-RPC error as the first message of the stream, or in a 200 JSON body (the SDK’s capacity), is a refusal', async () => {
    server.script = (exchange) => {
      openStream(exchange.res);
      exchange.res.end(
        frame({ jsonrpc: '2.0', id: exchange.body.id, error: { code: -32603, message: 'Subscription limit reached' } }),
      );
    };
    const inStream = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(inStream).toMatchObject({ code: ErrorCode.ListenRefused, status: 200, rpcCode: -32603 });
    server.script = (exchange) => refuse(exchange, 200, -32603, 'Subscription limit reached');
    const inBody = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(inBody).toMatchObject({ code: ErrorCode.ListenRefused, status: 200, rpcCode: -32603 });
  });

  test('a stream that ends before its acknowledgement, with or without a keepalive first', async () => {
    for (const before of ['', ': keepalive\n\n']) {
      server.script = ({ res }) => {
        openStream(res);
        res.end(before);
      };
      const error = await rejection(listen(server.url, { toolsListChanged: true }));
      expect(error).toMatchObject({ code: ErrorCode.ListenEndedBeforeAck, status: 200 });
    }
    server.script = ({ res }) => {
      openStream(res);
      res.write(': keepalive\n\n');
      setTimeout(() => res.destroy(), 20);
    };
    const broken = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(broken.code).toBe(ErrorCode.ListenEndedBeforeAck);
  });

  test('an invalid acknowledgement: another method, another subscription id, not JSON, not a stream', async () => {
    const cases: [string, Script, RegExp][] = [
      [
        'another method first',
        (exchange) => {
          openStream(exchange.res);
          exchange.res.write(noteFrame(exchange.body.id, TOOLS));
        },
        /expected `notifications\/subscriptions\/acknowledged` first, got notifications\/tools\/list_changed/,
      ],
      [
        'the result first',
        (exchange) => {
          openStream(exchange.res);
          exchange.res.write(resultFrame(exchange.body.id));
        },
        /got a result/,
      ],
      [
        'another subscription id',
        (exchange) => acknowledge({ ...exchange, body: { id: 'someone-else' } }, { toolsListChanged: true }),
        /its subscription id is "someone-else", expected "mine"/,
      ],
      [
        'no filter',
        (exchange) => {
          openStream(exchange.res);
          exchange.res.write(frame({ jsonrpc: '2.0', method: ACK, params: { _meta: { [SUBSCRIPTION_ID]: 'mine' } } }));
        },
        /`params.notifications` is not an object/,
      ],
      [
        'not JSON',
        ({ res }) => {
          openStream(res);
          res.write('data: {"jsonrpc":\n\n');
        },
        /the first message of the stream is not a JSON object/,
      ],
      [
        'an HTML page',
        ({ res }) => {
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end('<html>hello</html>');
        },
        /expected a text\/event-stream answer, got HTTP 200 OK text\/html/,
      ],
      [
        'JSON that is not an error',
        (exchange) => {
          exchange.res.writeHead(200, { 'content-type': 'application/json' });
          exchange.res.end(JSON.stringify({ jsonrpc: '2.0', id: exchange.body.id, result: {} }));
        },
        /expected an event stream, got JSON/,
      ],
    ];
    for (const [what, script, message] of cases) {
      server.script = script;
      const error = await rejection(listen(server.url, { toolsListChanged: true }, { id: 'mine' }));
      expect({ [what]: error.code }).toStrictEqual({ [what]: ErrorCode.ListenInvalidAck });
      expect({ [what]: error.message }).toStrictEqual({ [what]: expect.stringMatching(message) });
    }
  });

  test('no answer at all: ListenFailed, with fetch’s error as the cause', async () => {
    const port = await freePort(); // nothing listens there
    const error = await rejection(listen(`http://127.0.0.1:${port}/mcp`, { toolsListChanged: true }));
    expect(error.code).toBe(ErrorCode.ListenFailed);
    expect(error.message).toMatch(/ECONNREFUSED/);
    expect((error.cause as Error).message).toBe('fetch failed'); // Node's fetch, whose own cause is the socket's error
  });

  test('no acknowledgement within ackTimeoutMs: ListenAckTimeout, and the request is dropped', async () => {
    server.script = ({ res }) => openStream(res); // headers, then nothing
    const error = await rejection(listen(server.url, { toolsListChanged: true }, { ackTimeoutMs: 100 }));
    expect(error.code).toBe(ErrorCode.ListenAckTimeout);
    expect(error.message).toMatch(/100 ms/);
    await server.exchanges[0]!.gone;
  });

  test('the caller’s signal aborts the request: ListenAborted, with the signal’s reason as the cause', async () => {
    server.script = () => {}; // no answer
    const controller = new AbortController();
    const pending = listen(server.url, { toolsListChanged: true }, { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort(new Error('shutting down'));
    const error = await rejection(pending);
    expect(error.code).toBe(ErrorCode.ListenAborted);
    expect((error.cause as Error).message).toBe('shutting down');
    const already = await rejection(
      listen(server.url, { toolsListChanged: true }, { signal: AbortSignal.abort(new Error('too late')) }),
    );
    expect(already.code).toBe(ErrorCode.ListenAborted);
    expect((already.cause as Error).message).toBe('too late');
  });
});

describe('after the acknowledgement', () => {
  test('resolves with the honoured filter; notifications come in order, then the end after the terminal result', async () => {
    server.script = (exchange) =>
      acknowledge(
        exchange,
        { resourceSubscriptions: ['note://x/1', 'note://x/2'] },
        ': keepalive\n\n' +
          updates(exchange.body.id, 1, 2) +
          'event: other\ndata: {"jsonrpc":"2.0","method":"ignored"}\n\ndata: not json\n\n' +
          noteFrame(exchange.body.id, TOOLS),
      );
    const subscription = await subscribe(server.url, { resourceSubscriptions: ['note://x/1', 'note://x/2', 'x:3'] });
    expect(subscription.honored).toStrictEqual({ resourceSubscriptions: ['note://x/1', 'note://x/2'] });
    expect(Object.isFrozen(subscription.honored)).toBe(true);
    const first = await subscription.waitFor(UPDATED);
    expect(first.params).toStrictEqual({ uri: 'note://x/1', _meta: { [SUBSCRIPTION_ID]: subscription.id } });
    expect(first.message).toStrictEqual({ jsonrpc: '2.0', method: UPDATED, params: first.params });
    server.exchanges[0]!.res.end(resultFrame(subscription.id));
    expect(await subscription.ended).toBe('complete');
    expect(subscription.endReason).toBe('complete');
    expect(lines(await drain(subscription))).toStrictEqual([`${UPDATED} note://x/2`, TOOLS, 'end complete']);
    expect(subscription.error).toBe(undefined);
  });

  test('after the terminal result the response is read to its end: its connection is reused, none is opened', async () => {
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true }, resultFrame(exchange.body.id));
      setTimeout(() => exchange.res.end(), 20); // the end of the response comes after the result
    };
    // The first listen may open a connection or reuse one; the three after it reuse that one. (Closing
    // the server's connections first instead raced the client noticing it, on a loaded machine.)
    let before = 0;
    for (let i = 0; i < 4; i++) {
      expect(await (await subscribe()).ended).toBe('complete');
      await new Promise((resolve) => setTimeout(resolve, 50)); // the response's last bytes are read
      if (i === 0) before = server.connections;
    }
    expect(server.connections - before).toBe(0);
  });

  test('a server that keeps the response open after its result is cut off after a second; the end is at once', async () => {
    server.script = (exchange) => acknowledge(exchange, { toolsListChanged: true }, resultFrame(exchange.body.id));
    const subscription = await subscribe();
    expect(await subscription.ended).toBe('complete');
    const started = Date.now();
    await server.exchanges[0]!.gone;
    expect(Date.now() - started).toBeGreaterThan(500);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('a stream that ends without the terminal result, or breaks, ends as lost', async () => {
    for (const cut of [(res: http.ServerResponse) => res.end(), (res: http.ServerResponse) => res.destroy()]) {
      server.script = (exchange) =>
        acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
      const subscription = await subscribe();
      await subscription.waitFor(TOOLS);
      cut(server.exchanges.at(-1)!.res);
      expect(await subscription.ended).toBe('lost');
      expect(lines(await drain(subscription))).toStrictEqual(['end lost']);
    }
  });

  test('close() is idempotent, ends with closed after what is buffered, and the server sees the client leave', async () => {
    server.script = (exchange) => acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
    const subscription = await subscribe();
    await new Promise((resolve) => setTimeout(resolve, 20)); // the notification is in the buffer
    await subscription.close();
    await subscription.close();
    expect(subscription.endReason).toBe('closed');
    expect(await subscription.ended).toBe('closed');
    await server.exchanges[0]!.gone;
    expect(lines(await drain(subscription))).toStrictEqual([TOOLS, 'end closed']);
    await subscription.close();
    expect(lines(await drain(subscription))).toStrictEqual([]); // the iterator is finished
  });

  test('the caller’s signal, once acknowledged, closes the subscription', async () => {
    const controller = new AbortController();
    const subscription = await subscribe(server.url, undefined, { signal: controller.signal });
    controller.abort();
    expect(await subscription.ended).toBe('closed');
    await server.exchanges[0]!.gone;
  });

  test('leaving a for-await loop closes the subscription', async () => {
    server.script = (exchange) =>
      acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS).repeat(3));
    const subscription = await subscribe();
    for await (const item of subscription) {
      expect(item.type).toBe('notification');
      break;
    }
    expect(subscription.endReason).toBe('closed');
    await server.exchanges[0]!.gone;
    expect(lines(await drain(subscription))).toStrictEqual([]);
  });

  test('an acknowledgement and the result in one chunk (an empty filter): resolved, then ended as complete', async () => {
    server.script = (exchange) => {
      openStream(exchange.res);
      exchange.res.end(ackFrame(exchange.body.id, {}) + resultFrame(exchange.body.id));
    };
    const subscription = await subscribe(
      server.url,
      { resourceSubscriptions: ['note://bob/secret'] },
      { reconnect: true },
    );
    expect(subscription.honored).toStrictEqual({});
    expect(await subscription.ended).toBe('complete'); // nothing honoured: no re-listen
    expect(lines(await drain(subscription))).toStrictEqual(['end complete']);
    expect(server.exchanges.length).toBe(1);
  });
});

describe('the bound on one event (maxEventBytes)', () => {
  const MAX = 1024;
  const big = (id: unknown): string => noteFrame(id, TOOLS, { padding: 'p'.repeat(MAX) });

  test('an event past it after the acknowledgement ends the stream as lost, with the error; what came before is kept', async () => {
    server.script = (exchange) =>
      acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS) + big(exchange.body.id));
    const subscription = await subscribe(server.url, undefined, { maxEventBytes: MAX });
    expect(await subscription.ended).toBe('lost');
    expect(subscription.error).toMatchObject({
      code: ErrorCode.ListenEventTooLarge,
      message: `mcp-subscriptions: an event of the stream exceeds maxEventBytes (${MAX})`,
      status: 200,
    });
    const items = await drain(subscription);
    expect(lines(items)).toStrictEqual([TOOLS, 'end lost']);
    expect(items.at(-1)).toMatchObject({ type: 'end', reason: 'lost', error: subscription.error });
    await server.exchanges.at(-1)!.gone; // the client let go of the response
  });

  test('an acknowledgement past it rejects listen() with ListenEventTooLarge', async () => {
    server.script = (exchange) => acknowledge(exchange, { resourceSubscriptions: [`note://x/${'u'.repeat(MAX)}`] });
    const error = await rejection(listen(server.url, { toolsListChanged: true }, { maxEventBytes: MAX }));
    expect(error).toMatchObject({
      code: ErrorCode.ListenEventTooLarge,
      message: `mcp-subscriptions: the first event of the stream exceeds maxEventBytes (${MAX})`,
    });
    await server.exchanges.at(-1)!.gone;
  });

  test('a server that sends one line without end cannot grow the client: it is cut once past the bound', async () => {
    let written = 0;
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true });
      exchange.res.write('data: ');
      const chunk = 'z'.repeat(16 * 1024);
      const more = (): void => {
        while (!exchange.res.destroyed) {
          written += chunk.length;
          if (!exchange.res.write(chunk)) {
            exchange.res.once('drain', more);
            return;
          }
        }
      };
      more();
    };
    const subscription = await subscribe(server.url, undefined, { maxEventBytes: 64 * 1024 });
    expect(await subscription.ended).toBe('lost');
    expect(subscription.error?.code).toBe(ErrorCode.ListenEventTooLarge);
    await server.exchanges.at(-1)!.gone;
    // The server got through little more than the bound and what sockets hold before it was cut off.
    expect(written).toBeLessThan(64 * 1024 * 1024);
  });

  test('with re-listening on, a stream cut for it is re-listened like any lost stream', async () => {
    server.script = (exchange) =>
      exchange.n === 1
        ? acknowledge(exchange, { toolsListChanged: true }, big(exchange.body.id))
        : acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
    const subscription = await subscribe(server.url, undefined, {
      maxEventBytes: MAX,
      reconnect: { initialDelayMs: 1, maxDelayMs: 1 },
    });
    await subscription.waitFor(TOOLS);
    expect(subscription.reconnects).toBe(1);
    expect(subscription.endReason).toBe(undefined);
  });
});

describe('a stream gone silent (idleTimeoutMs)', () => {
  test('nothing at all after the acknowledgement: lost, with ListenIdleTimeout, and the response is let go', async () => {
    const subscription = await subscribe(server.url, undefined, { idleTimeoutMs: 200 });
    expect(await subscription.ended).toBe('lost');
    expect(subscription.error).toMatchObject({
      code: ErrorCode.ListenIdleTimeout,
      message: 'mcp-subscriptions: the stream sent nothing, not even a keepalive, for 200 ms (idleTimeoutMs)',
      status: 200,
    });
    expect(lines(await drain(subscription))).toStrictEqual(['end lost']);
    await server.exchanges.at(-1)!.gone;
  });

  test('keepalive comments keep a quiet stream open: every byte restarts the clock', async () => {
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true });
      let sent = 0;
      // 15 keepalives 100 ms apart: 1.5 s of no notification, never 1 s of nothing.
      const tick = setInterval(() => {
        if (exchange.res.destroyed) return clearInterval(tick);
        if (++sent <= 15) exchange.res.write(': keepalive\n\n');
        else {
          clearInterval(tick);
          exchange.res.write(noteFrame(exchange.body.id, TOOLS));
        }
      }, 100);
    };
    const subscription = await subscribe(server.url, undefined, { idleTimeoutMs: 1000 });
    await subscription.waitFor(TOOLS, { timeoutMs: 10_000 });
    expect(subscription.endReason).toBe(undefined);
  });

  test('with re-listening on, a silent stream is re-listened like any lost stream', async () => {
    server.script = (exchange) =>
      exchange.n === 1
        ? acknowledge(exchange, { toolsListChanged: true })
        : acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
    const subscription = await subscribe(server.url, undefined, {
      idleTimeoutMs: 200,
      reconnect: { initialDelayMs: 1, maxDelayMs: 1 },
    });
    const items = subscription[Symbol.asyncIterator]();
    expect((await items.next()).value).toMatchObject({ type: 'gap', reason: 'lost' });
    expect((await items.next()).value).toMatchObject({ type: 'notification', method: TOOLS });
    await server.exchanges[0]!.gone;
  });
});

describe('the buffer', () => {
  /** Acknowledges, then writes notes 1..n and the terminal result at once, before anyone reads. */
  function burst(n: number): Script {
    return (exchange) => {
      acknowledge(exchange, { resourceSubscriptions: ['note://x/*'] }, updates(exchange.body.id, 1, n));
      exchange.res.end(resultFrame(exchange.body.id));
    };
  }
  const note = (i: number): string => `${UPDATED} note://x/${i}`;

  test("'drop-oldest' (the default) keeps the newest, and counts the drops where they happened", async () => {
    server.script = burst(6);
    const subscription = await subscribe(server.url, undefined, { maxBuffer: 3 });
    expect(await subscription.ended).toBe('complete');
    expect(subscription.dropped).toBe(3);
    expect(lines(await drain(subscription))).toStrictEqual(['dropped 3', note(4), note(5), note(6), 'end complete']);
  });

  test("'drop-newest' keeps the oldest; the drops come after them, before the end", async () => {
    server.script = burst(6);
    const subscription = await subscribe(server.url, undefined, { maxBuffer: 3, overflow: 'drop-newest' });
    expect(await subscription.ended).toBe('complete');
    expect(lines(await drain(subscription))).toStrictEqual([note(1), note(2), note(3), 'dropped 3', 'end complete']);
  });

  test("'close' ends the subscription as overflow, after what it holds and the one that did not fit", async () => {
    server.script = burst(6);
    const subscription = await subscribe(server.url, undefined, { maxBuffer: 3, overflow: 'close' });
    expect(await subscription.ended).toBe('overflow');
    expect(subscription.dropped).toBe(1);
    expect(lines(await drain(subscription))).toStrictEqual([note(1), note(2), note(3), 'dropped 1', 'end overflow']);
    await server.exchanges[0]!.gone;
  });

  test('a consumer that catches up gets every notification: the bound is on what waits, not on the total', async () => {
    server.script = (exchange) => acknowledge(exchange, { resourceSubscriptions: ['note://x/*'] });
    const subscription = await subscribe(server.url, undefined, { maxBuffer: 2 });
    const { res, body } = server.exchanges[0]!;
    for (let i = 1; i <= 6; i += 2) {
      res.write(updates(body.id, i, i + 1));
      expect((await subscription.waitFor(UPDATED)).params.uri).toBe(`note://x/${i}`);
      expect((await subscription.waitFor(UPDATED)).params.uri).toBe(`note://x/${i + 1}`);
    }
    expect(subscription.dropped).toBe(0);
  });

  test('drops merge into one count per run, placed among markers where they happened', () => {
    const queue = new ItemQueue(2, 'drop-oldest');
    const n = (i: number) => ({ type: 'notification' as const, method: `m${i}`, params: {}, message: {} as never });
    queue.pushNotification(n(1));
    queue.pushMarker({ type: 'gap', reason: 'lost', honored: {}, attempts: 1 });
    queue.pushNotification(n(2));
    queue.pushNotification(n(3)); // drops 1 (before the gap)
    queue.pushNotification(n(4)); // drops 2 (after the gap)
    queue.pushNotification(n(5)); // drops 3: merged with 2's
    const taken: SubscriptionItem[] = [];
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) taken.push(item);
    expect(lines(taken)).toStrictEqual(['dropped 1', 'gap lost', 'dropped 2', 'm4', 'm5']);
    expect(queue.dropped).toBe(3);

    const newest = new ItemQueue(1, 'drop-newest');
    newest.pushNotification(n(1));
    newest.pushNotification(n(2));
    expect(lines([newest.shift()!])).toStrictEqual(['m1']);
    // The drop is reported when the consumer reaches it, even if nothing follows yet.
    expect(lines([newest.shift()!])).toStrictEqual(['dropped 1']);
    expect(newest.shift()).toBe(undefined);
  });
});

describe('waitFor()', () => {
  test('by method or predicate, consuming what comes before; a timeout names what it waited for and what came', async () => {
    server.script = (exchange) =>
      acknowledge(
        exchange,
        { toolsListChanged: true, resourceSubscriptions: ['note://x/1', 'note://x/2'] },
        noteFrame(exchange.body.id, TOOLS) + updates(exchange.body.id, 1, 2) + noteFrame(exchange.body.id, TOOLS),
      );
    const subscription = await subscribe();
    const second = await subscription.waitFor((n) => n.params.uri === 'note://x/2');
    expect(second.params.uri).toBe('note://x/2');
    await subscription.waitFor(TOOLS);
    const error = await rejection<WaitForError>(subscription.waitFor(PROMPTS, { timeoutMs: 50 }));
    expect(error).toMatchObject({ name: 'WaitForError', code: ErrorCode.WaitTimeout, awaited: PROMPTS, received: [] });
    expect(error.message).toBe(
      `mcp-subscriptions: waitFor() timed out after 50 ms waiting for ${PROMPTS}; received: nothing`,
    );
    server.exchanges[0]!.res.write(noteFrame(subscription.id, TOOLS) + updates(subscription.id, 1, 1));
    const predicate = await rejection<WaitForError>(
      subscription.waitFor((n) => n.params.uri === 'note://x/9', { timeoutMs: 100 }),
    );
    expect(predicate.message).toMatch(
      /waiting for a notification matching \(n\)=>n\.params\.uri === 'note:\/\/x\/9'|waiting for a notification matching .*note:\/\/x\/9/,
    );
    expect(predicate.message).toMatch(
      /received: notifications\/tools\/list_changed, notifications\/resources\/updated note:\/\/x\/1$/,
    );
    expect(predicate.received.length).toBe(2);
  });

  test('rejects when the subscription ends first, leaving the end for the iterator', async () => {
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
      exchange.res.end(resultFrame(exchange.body.id));
    };
    const subscription = await subscribe();
    const error = await rejection<WaitForError>(subscription.waitFor(PROMPTS));
    expect(error).toMatchObject({ code: ErrorCode.WaitEnded, reason: 'complete' });
    expect(error.message).toMatch(/ended \('complete'\); received: notifications\/tools\/list_changed$/);
    expect(lines(await drain(subscription))).toStrictEqual(['end complete']);
    expect((await rejection<WaitForError>(subscription.waitFor(TOOLS))).code).toBe(ErrorCode.WaitEnded);
  });

  test('a predicate that throws rejects with its error', async () => {
    server.script = (exchange) => acknowledge(exchange, { toolsListChanged: true }, noteFrame(exchange.body.id, TOOLS));
    const subscription = await subscribe();
    const error = await rejection<Error>(
      subscription.waitFor(() => {
        throw new Error('bad predicate');
      }),
    );
    expect(error.message).toBe('bad predicate');
  });
});

describe('re-listening (reconnect)', () => {
  const quick = { initialDelayMs: 5, maxDelayMs: 20 };

  test('after a lost stream: backs off, honours Retry-After, then a gap with the new filter, then the new stream', async () => {
    server.script = (exchange) => {
      const { id } = exchange.body;
      if (exchange.n === 1) {
        acknowledge(exchange, { toolsListChanged: true }, noteFrame(id, TOOLS));
        exchange.res.end(); // no terminal result: lost
      } else if (exchange.n === 2) {
        refuse(exchange, 503, -32603, 'Subscription limit reached', { headers: { 'retry-after': '1' } });
      } else {
        acknowledge(exchange, { toolsListChanged: true, promptsListChanged: true }, noteFrame(id, PROMPTS));
      }
    };
    const subscription = await subscribe(
      server.url,
      { toolsListChanged: true, promptsListChanged: true },
      { reconnect: quick, id: 'again' },
    );
    const items: SubscriptionItem[] = [];
    for await (const item of subscription) {
      items.push(item);
      if (item.type === 'notification' && item.method === PROMPTS) break;
    }
    expect(lines(items)).toStrictEqual([TOOLS, 'gap lost', PROMPTS]);
    expect(items[1]).toStrictEqual({
      type: 'gap',
      reason: 'lost',
      honored: { toolsListChanged: true, promptsListChanged: true },
      attempts: 2,
    });
    expect(subscription.honored).toStrictEqual({ toolsListChanged: true, promptsListChanged: true });
    expect(subscription.reconnects).toBe(1);
    // Every attempt is the same request, and the one after the 503 waited for its Retry-After.
    expect(new Set(server.exchanges.map((e) => e.text)).size).toBe(1);
    const [, refused, accepted] = server.exchanges;
    expect(accepted!.at - refused!.at).toBeGreaterThanOrEqual(950);
    expect(accepted!.at - refused!.at).toBeLessThan(5000);
  });

  test('after a complete with something honoured (a server shutting down), as a gap of reason complete', async () => {
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true });
      if (exchange.n === 1) exchange.res.end(resultFrame(exchange.body.id));
    };
    const subscription = await subscribe(server.url, undefined, { reconnect: quick });
    const gap = await subscription[Symbol.asyncIterator]().next();
    expect(gap.value).toMatchObject({ type: 'gap', reason: 'complete', attempts: 1 });
    expect(subscription.endReason).toBe(undefined);
    expect(server.exchanges.length).toBe(2);
  });

  test('a graceful end is routine: after a run of failures, it re-listens at the first step, with no error', async () => {
    server.script = (exchange) => {
      const { id } = exchange.body;
      if (exchange.n === 1) {
        acknowledge(exchange, { toolsListChanged: true });
        exchange.res.end(); // lost
      } else if (exchange.n <= 3) {
        exchange.res.writeHead(502).end('bad gateway');
      } else if (exchange.n === 4) {
        acknowledge(exchange, { toolsListChanged: true }, resultFrame(id)); // then the server ends it gracefully
        exchange.res.end();
      } else {
        acknowledge(exchange, { toolsListChanged: true }, noteFrame(id, TOOLS));
      }
    };
    const subscription = await subscribe(server.url, undefined, { reconnect: quick });
    const items: SubscriptionItem[] = [];
    for await (const item of subscription) {
      items.push(item);
      if (item.type === 'notification') break;
    }
    // The failures grew the backoff (three attempts); the graceful end started it again (one).
    expect(
      items.map((item) => (item.type === 'gap' ? `gap ${item.reason} ${item.attempts}` : item.type)),
    ).toStrictEqual(['gap lost 3', 'gap complete 1', 'notification']);
    expect(subscription.error).toBeUndefined();
  });

  test('a refusal that would be refused again ends the subscription as refused, with the error', async () => {
    server.script = (exchange) => {
      if (exchange.n === 1) acknowledge(exchange, { toolsListChanged: true });
      else exchange.res.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
    };
    const subscription = await subscribe(server.url, undefined, { reconnect: quick });
    server.exchanges[0]!.res.destroy(); // the stream breaks
    expect(await subscription.ended).toBe('refused');
    expect(subscription.error).toMatchObject({ code: ErrorCode.ListenRefused, status: 401 });
    const items = await drain(subscription);
    expect(lines(items)).toStrictEqual(['end refused']);
    expect((items[0] as { error?: ListenError }).error).toBe(subscription.error);
    expect(server.exchanges.length).toBe(2);
  });

  test('gives up after maxAttempts retryable failures in a row: lost, with the last failure', async () => {
    server.script = (exchange) => {
      if (exchange.n === 1) {
        acknowledge(exchange, { toolsListChanged: true });
        exchange.res.end();
      } else {
        exchange.res.writeHead(502).end('bad gateway');
      }
    };
    const subscription = await subscribe(server.url, undefined, { reconnect: { ...quick, maxAttempts: 3 } });
    expect(await subscription.ended).toBe('lost');
    expect(subscription.error).toMatchObject({ code: ErrorCode.ListenRefused, status: 502, body: 'bad gateway' });
    expect(server.exchanges.length).toBe(4);
  });

  test('close() during the backoff ends it at once, as closed', async () => {
    server.script = (exchange) => {
      if (exchange.n === 1) {
        acknowledge(exchange, { toolsListChanged: true });
        exchange.res.end();
      } else {
        refuse(exchange, 503, -32603, 'closing', { headers: { 'retry-after': '600' } });
      }
    };
    const subscription = await subscribe(server.url, undefined, { reconnect: quick });
    while (server.exchanges.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const started = Date.now();
    await subscription.close();
    expect(await subscription.ended).toBe('closed');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(lines(await drain(subscription))).toStrictEqual(['end closed']);
  });

  test('is off by default: a lost stream ends the subscription', async () => {
    server.script = (exchange) => {
      acknowledge(exchange, { toolsListChanged: true });
      exchange.res.end();
    };
    const subscription = await subscribe();
    expect(await subscription.ended).toBe('lost');
    expect(server.exchanges.length).toBe(1);
  });

  test('backoff: full jitter under an exponential step capped at maxDelayMs, never below Retry-After', () => {
    const reconnect = { initialDelayMs: 100, maxDelayMs: 1000, maxAttempts: false as const };
    expect(
      [1, 2, 3, 4, 5, 10].map((attempt) => backoffDelay(reconnect, attempt, undefined, () => 0.999999)),
    ).toStrictEqual([99, 199, 399, 799, 999, 999]);
    expect(backoffDelay(reconnect, 1, undefined, () => 0)).toBe(0);
    expect(backoffDelay(reconnect, 1, 5000, () => 0.5)).toBe(5000);
    expect(parseRetryAfter('3')).toBe(3000);
    expect(parseRetryAfter(' 0 ')).toBe(0);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 07:27:58 GMT'))).toBe(2000);
    expect(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT')).toBe(0); // past
    expect(parseRetryAfter('soon')).toBe(undefined);
    expect(parseRetryAfter(null)).toBe(undefined);
  });
});

describe('mistakes in the arguments throw at the call, with a code per check', () => {
  test('unknown options are refused with the nearest one suggested', () => {
    const error = thrown(() => listen(server.url, {}, { maxBufer: 3 } as never));
    expectOptionsError(error);
    expect(error.code).toBe(ErrorCode.UnknownOption);
    expect(error.message).toBe('mcp-subscriptions: Unknown option `maxBufer` of listen(); did you mean `maxBuffer`?');
    expect(thrown(() => listen(server.url, {}, { reconnect: { maxDelay: 5 } } as never)).message).toMatch(
      /Unknown option `maxDelay` of listen\(\) `reconnect`; did you mean `maxDelayMs`\?$/,
    );
    expect(thrown(() => listen(server.url, {}, { nonsense: 1 } as never)).message).toMatch(
      /expected one of `headers`, `id`/,
    );
    // The package's one distance: two swapped letters are one edit, so `di` is near enough to `id`.
    expect(thrown(() => listen(server.url, {}, { di: 'x' } as never)).message).toMatch(
      /Unknown option `di` of listen\(\); did you mean `id`\?$/,
    );
  });

  test('each check has its code, and nothing is sent', () => {
    const cases: [() => unknown, string][] = [
      [() => listen('/mcp', {}), ErrorCode.InvalidUrl],
      [() => listen('ws://127.0.0.1/mcp', {}), ErrorCode.InvalidUrl],
      [() => listen(server.url, null as never), ErrorCode.InvalidFilter],
      [() => listen(server.url, { toolsListChanged: 'yes' } as never), ErrorCode.InvalidFilter],
      [() => listen(server.url, { resourceSubscriptions: 'note://a/b' } as never), ErrorCode.InvalidFilter],
      [() => listen(server.url, { taskIds: ['a', 7] } as never), ErrorCode.InvalidFilter],
      [() => listen(server.url, {}, 'options' as never), ErrorCode.OptionsNotObject],
      [() => listen(server.url, {}, { headers: { 'Mcp-Method': 'tools/list' } }), ErrorCode.InvalidHeaders],
      [() => listen(server.url, {}, { headers: { authorization: 5 } as never }), ErrorCode.InvalidHeaders],
      [() => listen(server.url, {}, { id: null as never }), ErrorCode.InvalidRequestId],
      [() => listen(server.url, {}, { id: Number.NaN }), ErrorCode.InvalidRequestId],
      [() => listen(server.url, {}, { fetch: 'fetch' as never }), ErrorCode.NotFunction],
      [() => listen(server.url, {}, { maxBuffer: 0 }), ErrorCode.NotPositiveInteger],
      [() => listen(server.url, {}, { maxEventBytes: 1.5 }), ErrorCode.NotPositiveInteger],
      [() => listen(server.url, {}, { idleTimeoutMs: 0 }), ErrorCode.NotPositiveInteger],
      [() => listen(server.url, {}, { idleTimeoutMs: 2 ** 31 }), ErrorCode.DurationTooLong],
      [() => listen(server.url, {}, { maxEventBytes: '4MB' as never }), ErrorCode.NotPositiveInteger],
      [() => listen(server.url, {}, { overflow: 'block' as never }), ErrorCode.NotOneOf],
      [() => listen(server.url, {}, { signal: {} as never }), ErrorCode.InvalidSignal],
      [() => listen(server.url, {}, { reconnect: 'yes' as never }), ErrorCode.OptionsNotObject],
      [() => listen(server.url, {}, { reconnect: { maxAttempts: 0 } }), ErrorCode.NotPositiveInteger],
      [
        () => listen(server.url, {}, { reconnect: { initialDelayMs: 10, maxDelayMs: 5 } }),
        ErrorCode.ConflictingOptions,
      ],
      [() => listen(server.url, {}, { ackTimeoutMs: 2 ** 31 }), ErrorCode.DurationTooLong],
      [() => listen(server.url, {}, { clientCapabilities: [] as never }), ErrorCode.OptionsNotObject],
    ];
    for (const [call, code] of cases) {
      const error = thrown(call);
      expectOptionsError(error);
      expect({ [String(call)]: error.code }).toStrictEqual({ [String(call)]: code });
    }
    expect(thrown(() => listen(server.url, { taskIds: ['a', 7] } as never)).message).toBe(
      'mcp-subscriptions: Expected `filter.taskIds[1]` to be a string, got `7` (number)',
    );
    expect(server.exchanges).toStrictEqual([]);
  });

  test('waitFor() checks its arguments', async () => {
    const subscription = await subscribe();
    expect(thrown(() => subscription.waitFor(42 as never)).code).toBe(ErrorCode.NotFunction);
    expect(thrown(() => subscription.waitFor(TOOLS, { timeoutMs: -1 })).code).toBe(ErrorCode.NotPositiveInteger);
    expect(thrown(() => subscription.waitFor(TOOLS, { timeout: 5 } as never)).message).toMatch(
      /did you mean `timeoutMs`\?/,
    );
  });

  test('errors are told apart by code across copies of the package', async () => {
    server.script = (exchange) => refuse(exchange, 400, -32602, 'bad');
    const error = await rejection(listen(server.url, { toolsListChanged: true }));
    expect(hasErrorCode(error, ErrorCode.ListenRefused)).toBe(true);
    expect(hasErrorCode(error, 'ERR_MCP_SUBSCRIPTIONS_LISTEN_REFUSED')).toBe(true);
  });
});
