/**
 * The Fastify plugin's streams over real loopback sockets, read by a real SSE client: events from the
 * hub the plugin decorates the app with, the exact HTTP/1.1 chunks on Fastify's hijacked response,
 * backpressure with a client that stops reading and resumes, capacity, the graceful end of every
 * stream on `app.close()`, and Fastify's own body limit in front of listen.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import Fastify, { type FastifyInstance, type RouteHandlerMethod } from 'fastify';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/fastify';
import { bearer } from '../helpers/bearer.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { bearerAuth, listenFastify } from '../helpers/fastify-apps.ts';
import { countBytesRead, sendHugeBody } from '../helpers/huge-body.ts';
import { dechunk, rawListen, rawPost, toolsFrameOf, updateFrameOf } from '../helpers/raw-http.ts';
import { listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const ACK = 'notifications/subscriptions/acknowledged';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const CAFE = 'note://alice/café-☕';

interface Served {
  readonly app: FastifyInstance;
  readonly hub: SubscriptionHub;
  readonly url: string;
  /** Requests the route's own handler received. */
  readonly handled: unknown[];
  open(id: string | number, notifications: Record<string, unknown>, user?: string): Promise<SseStream>;
  closeStreams(): void;
}

/** An app with the plugin in front of `POST /mcp` (bearer auth, `bodyLimit` as given), listening. */
async function serve(
  init: { hub?: ConstructorParameters<typeof SubscriptionHub>[0]; bodyLimit?: number } = {},
): Promise<Served> {
  const hub = new SubscriptionHub({ logger: recordingLogger(), ...init.hub });
  const app = Fastify();
  await app.register(mcpSubscriptions, {
    hub,
    capabilities: { toolsListChanged: true, resourceSubscriptions: true },
    canRead: () => true,
    keepAliveMs: false,
  });
  const handled: unknown[] = [];
  const handler: RouteHandlerMethod = (request, reply) => {
    handled.push(request.body);
    return reply.send({ passed: true });
  };
  app.post('/mcp', { onRequest: bearerAuth, ...(init.bodyLimit ? { bodyLimit: init.bodyLimit } : {}) }, handler);
  const url = await listenFastify(app);
  const streams: SseStream[] = [];
  return {
    app,
    hub,
    url,
    handled,
    async open(id, notifications, user = 'alice') {
      const stream = await post(url, listenBody(id, notifications), listenHeaders(bearer(user)));
      streams.push(stream);
      return stream;
    },
    closeStreams() {
      for (const stream of streams.splice(0)) stream.close();
    },
  };
}

async function stop(s: Served | undefined): Promise<void> {
  s?.closeStreams();
  await s?.app.close();
  await s?.hub.close();
}

describe('Fastify: the stream', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serve();
  });
  afterEach(() => s.closeStreams());
  afterAll(() => stop(s));

  test('headers, the ack first, events published on fastify.mcpSubscriptions.hub, each tagged, then the result', async () => {
    const hub = s.app.mcpSubscriptions.hub;
    expect(hub).toBe(s.hub);
    const stream = await s.open('L-1', { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] });
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.headers['cache-control']).toBe('no-cache, no-transform');
    expect(stream.headers['x-accel-buffering']).toBe('no');
    expect(stream.headers['mcp-session-id']).toBeUndefined();
    expect((await stream.event(1)).json.method).toBe(ACK);
    expect(hub.toolsListChanged().written).toBe(1);
    expect(hub.resourceUpdated('note://alice/todo').written).toBe(1);
    expect(hub.resourceUpdated('note://alice/other').matched).toBe(0);
    await stream.event(3);
    await hub.complete();
    await stream.end();
    const messages = stream.events.map((event) => event.json);
    expect(messages.map((m) => m.method ?? m.result?.resultType)).toStrictEqual([
      ACK,
      'notifications/tools/list_changed',
      'notifications/resources/updated',
      'complete',
    ]);
    for (const message of messages) expect((message.params ?? message.result)._meta[SUBSCRIPTION_ID]).toBe('L-1');
    expect(s.handled).toStrictEqual([]);
  });

  test('HTTP/1.1 on the hijacked reply.raw: every batch is one chunk whose size is its length in bytes, non-ASCII included', async () => {
    const raw = await rawListen(
      s.url,
      '1.1',
      listenBody('raw', { toolsListChanged: true, resourceSubscriptions: [CAFE] }),
      listenHeaders(bearer('alice')),
    );
    try {
      await raw.until((text) => text.includes('acknowledged'), 'the ack');
      s.hub.toolsListChanged();
      await raw.until((text) => text.includes('list_changed'), 'the tools event');
      s.hub.resourceUpdated(CAFE);
      s.hub.resourceUpdated(CAFE); // the same tick: one batch, one chunk
      await raw.until((text) => text.split('resources/updated').length === 3, 'both updates');
      await s.hub.complete();
      const { head, body } = await raw.ended();
      expect(head).toMatch(/^HTTP\/1\.1 200 /);
      expect(head.toLowerCase()).toContain('transfer-encoding: chunked');
      const frames = dechunk(body).map((chunk) => chunk.toString('utf8'));
      expect(frames).toHaveLength(4); // ack, tools, both updates in one write, the result
      expect(frames[1]).toBe(toolsFrameOf('raw'));
      expect(frames[2]).toBe(updateFrameOf(CAFE, 'raw').repeat(2));
      expect(JSON.parse(frames[3]!.slice('event: message\ndata: '.length)).result.resultType).toBe('complete');
    } finally {
      raw.destroy();
    }
  });

  test('a client that stops reading: nothing is dropped, repeats coalesce, and on resume it parses every event', async () => {
    const filler = `note://filler/${'f'.repeat(64 * 1024)}`;
    const targets = Array.from({ length: 8 }, (_, i) => `note://t/${i}`);
    const stream = await s.open('bp', { resourceSubscriptions: [filler, ...targets] });
    await stream.event(1);
    stream.pause();
    // Fill the socket: publish the big event until the stream has to queue.
    let written = 0;
    for (let i = 0; i < 2000; i++) {
      const report = s.hub.resourceUpdated(filler);
      written += report.written;
      if (report.queued === 1) break;
    }
    // If not, the socket never pushed back.
    expect(s.hub.stats().queued).toBe(1);
    for (const uri of targets) expect(s.hub.resourceUpdated(uri)).toMatchObject({ queued: 1 });
    expect(s.hub.resourceUpdated(targets[5]!)).toMatchObject({ queued: 0, coalesced: 1 });
    expect(s.hub.stats()).toMatchObject({ queued: 9, dropped: 0 });

    stream.resume();
    await stream.until(() => stream.events.length === 1 + written + 9, 'the queued events', 15_000);
    expect(stream.events.slice(1, 1 + written).every((e) => e.json.params.uri === filler)).toBe(true);
    expect(stream.events.slice(1 + written).map((e) => e.json.params.uri)).toStrictEqual([filler, ...targets]);
    await s.hub.complete();
    await stream.end();
    expect(stream.events.length).toBe(1 + written + 9 + 1);
    expect(stream.events.at(-1)?.json.result.resultType).toBe('complete');
  });
});

describe('Fastify: capacity', () => {
  test('over maxSubscriptions: 503 with Retry-After and -32603 "Subscription limit reached"', async () => {
    const s = await serve({ hub: { maxSubscriptions: 1, retryAfterSeconds: 2 } });
    try {
      const first = await s.open('a1', { toolsListChanged: true });
      await first.event(1);
      const refused = await s.open('a2', { toolsListChanged: true }, 'bob');
      await refused.end();
      expect({ status: refused.status, retryAfter: refused.headers['retry-after'] }).toStrictEqual({
        status: 503,
        retryAfter: '2',
      });
      expect(JSON.parse(refused.text)).toStrictEqual({
        jsonrpc: '2.0',
        id: 'a2',
        error: { code: -32603, message: 'Subscription limit reached' },
      });
      expect(s.handled).toStrictEqual([]);
    } finally {
      await stop(s);
    }
  });
});

describe('Fastify: app.close()', () => {
  test('ends every open stream with its terminal result, and resolves within 5 s', async () => {
    const s = await serve();
    try {
      const streams = [
        await s.open('c1', { toolsListChanged: true }, 'alice'),
        await s.open('c2', { resourceSubscriptions: ['note://bob/x'] }, 'bob'),
        await s.open(3, { toolsListChanged: true, resourceSubscriptions: ['note://carol/y'] }, 'carol'),
      ];
      for (const stream of streams) await stream.event(1);
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        s.app.close().then(() => 'closed'),
        new Promise((resolve) => (timer = setTimeout(() => resolve('still closing after 5 s'), 5000))),
      ]);
      clearTimeout(timer);
      expect(outcome).toBe('closed');
      for (const stream of streams) {
        await stream.end();
        const id = stream.events[0]?.json.params._meta[SUBSCRIPTION_ID];
        expect(stream.events.map((event) => event.json.method ?? event.json.result?.resultType)).toStrictEqual([
          ACK,
          'complete',
        ]);
        expect(stream.events[1]?.json).toStrictEqual({
          jsonrpc: '2.0',
          id,
          result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: id } },
        });
      }
      expect(s.hub.stats().openStreams).toBe(0);
    } finally {
      await stop(s);
    }
  });
});

describe("Fastify: a listen body over the route's bodyLimit", () => {
  const LIMIT = 1024;
  let s: Served;
  beforeAll(async () => {
    s = await serve({ bodyLimit: LIMIT });
  });
  afterEach(() => s.closeStreams());
  afterAll(() => stop(s));

  const oversized = Buffer.from(
    JSON.stringify(
      listenBody('big', { resourceSubscriptions: Array.from({ length: 100 }, (_, i) => `note://padding/${i}`) }),
    ),
  );

  for (const framing of ['content-length', 'chunked'] as const) {
    test(`${framing}, sent whole: Fastify's own 413 before any handler, and the connection closed; not our 413`, async () => {
      expect(oversized.length).toBeGreaterThan(LIMIT);
      const opened = s.hub.stats().opened;
      const answer = await rawPost(s.url, {
        headers: Object.entries(listenHeaders(bearer('alice'))),
        body: oversized,
        framing,
      });
      await answer.end();
      expect(answer.status).toBe(413);
      expect(answer.headers.connection).toBe('close');
      // Fastify's error body: neither a JSON-RPC error nor the plugin's own 413 (lib/http.ts
      // refuseOversizedBody answers -32600 "Request body exceeds N bytes").
      expect(JSON.parse(answer.text)).toStrictEqual({
        statusCode: 413,
        code: 'FST_ERR_CTP_BODY_TOO_LARGE',
        error: 'Payload Too Large',
        message: 'Request body is too large',
      });
      expect(s.handled).toStrictEqual([]);
      expect(s.hub.stats().opened).toBe(opened);
      // Nothing hangs: the next listen is served.
      const next = await s.open('next', { toolsListChanged: true });
      expect((await next.event(1)).json.method).toBe(ACK);
    });
  }

  test('content-length, a client still sending: it gets the 413, and the server reads about the limit, not the body', async () => {
    const bytesRead = countBytesRead(s.app.server);
    const { response, sent } = await sendHugeBody(s.url, 'content-length', bearer('alice'));
    expect({ statusLine: response.split('\r\n')[0], sent }).toStrictEqual({
      statusLine: 'HTTP/1.1 413 Payload Too Large',
      sent,
    });
    expect(bytesRead()).toBeLessThan(LIMIT + 256 * 1024);
  });
});
