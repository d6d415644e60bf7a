/**
 * The Express middleware over real loopback sockets, on Express 5 and Express 4, read by a real SSE
 * client: the stream's frames and keepalives, hang-up and cancellation, capacity, backpressure with
 * a client that stops reading, and that an open stream pins neither `req.body` nor the parsed body.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import type { Request, RequestHandler } from 'express';
import { SubscriptionHub, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsOptions } from 'mcp-subscriptions/express';
import { expressFlavours, listenOn, type ExpressFlavour, type RunningServer } from './helpers/express-apps.ts';
import { recordingLogger, waitFor } from './helpers/fake-response.ts';
import { exposeGc } from './helpers/gc.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from './helpers/sse.ts';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
const TASKS_META = {
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

/** Principal from the X-User header, as the SDK's bearer auth would set req.auth. */
const authAs: RequestHandler = (req, _res, next) => {
  const user = req.get('x-user');
  if (user !== undefined)
    (req as Request & { auth?: unknown }).auth = { token: 't', clientId: 'c', scopes: [], extra: { sub: user } };
  next();
};

interface Served {
  hub: SubscriptionHub;
  server: RunningServer;
  url: string;
  /** Requests the host handler after the middleware received. */
  passedOn: { method: unknown; body: unknown; user: string | undefined }[];
  streams: SseStream[];
  open(
    id: string | number,
    notifications: Record<string, unknown>,
    user?: string,
    meta?: Record<string, unknown>,
  ): Promise<SseStream>;
  cleanup(): Promise<void>;
}

async function serve(
  flavour: ExpressFlavour,
  init: {
    hub?: ConstructorParameters<typeof SubscriptionHub>[0];
    options?: Partial<McpSubscriptionsOptions>;
    before?: RequestHandler[];
  } = {},
): Promise<Served> {
  const hub = new SubscriptionHub({ logger: recordingLogger(), ...init.hub });
  const passedOn: Served['passedOn'] = [];
  const app = flavour.express();
  app.post(
    '/mcp',
    authAs,
    ...(init.before ?? []),
    mcpSubscriptions({
      hub,
      capabilities: { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: true, tasks: true },
      canRead: () => true,
      canAccessTask: () => true,
      keepAliveMs: false,
      ...init.options,
    }),
    (req, res) => {
      const body = req.body as { method?: unknown } | undefined;
      passedOn.push({ method: body?.method, body, user: req.get('x-user') });
      res.status(200).json({ passed: true });
    },
  );
  const server = await listenOn(app);
  const streams: SseStream[] = [];
  return {
    hub,
    server,
    url: server.url,
    passedOn,
    streams,
    async open(id, notifications, user = 'alice', meta = {}) {
      const stream = await post(server.url, listenBody(id, notifications, meta), listenHeaders({ 'x-user': user }));
      streams.push(stream);
      return stream;
    },
    async cleanup() {
      for (const stream of streams) stream.close();
      await hub.close();
      await server.close();
    },
  };
}

function cancelBody(requestId: string | number) {
  return { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId, reason: 'done' } };
}

for (const flavour of expressFlavours) {
  describe(`${flavour.name}: the stream over a real socket`, () => {
    test('headers, ack first, notifications and keepalives, each message tagged, then the terminal result', async () => {
      const s = await serve(flavour, { options: { keepAliveMs: 20, serverInfo: { name: 'notes', version: '1' } } });
      try {
        const stream = await s.open('L-1', {
          toolsListChanged: true,
          resourceSubscriptions: ['note://alice/todo', 'note://alice/todo'],
        });
        assert.equal(stream.status, 200);
        assert.equal(stream.headers['content-type'], 'text/event-stream');
        assert.equal(stream.headers['cache-control'], 'no-cache, no-transform');
        assert.equal(stream.headers['x-accel-buffering'], 'no');
        assert.equal(stream.headers['mcp-session-id'], undefined);
        const ack = await stream.event(1);
        assert.deepEqual(ack.json, {
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: {
            _meta: { [SUBSCRIPTION_ID]: 'L-1' },
            notifications: { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] },
          },
        });
        assert.ok(
          stream.text.startsWith(
            'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"',
          ),
        );

        await stream.until(() => stream.comments.filter((c) => c === 'keepalive').length >= 2, 'two keepalives');
        assert.ok(stream.text.includes('\n\n: keepalive\n\n'));

        assert.equal(s.hub.toolsListChanged().written, 1);
        assert.equal(s.hub.resourceUpdated('note://alice/todo').written, 1);
        assert.equal(s.hub.promptsListChanged().matched, 0, 'prompts were not asked for');
        await stream.event(3);
        await s.hub.close();
        await stream.end();
        const messages = stream.events.map((e) => e.json);
        assert.deepEqual(
          messages.map((m) => m.method ?? m.result?.resultType),
          [
            'notifications/subscriptions/acknowledged',
            'notifications/tools/list_changed',
            'notifications/resources/updated',
            'complete',
          ],
        );
        assert.deepEqual(messages[2].params, { uri: 'note://alice/todo', _meta: { [SUBSCRIPTION_ID]: 'L-1' } });
        assert.deepEqual(messages[3], {
          jsonrpc: '2.0',
          id: 'L-1',
          result: {
            resultType: 'complete',
            _meta: { [SUBSCRIPTION_ID]: 'L-1', 'io.modelcontextprotocol/serverInfo': { name: 'notes', version: '1' } },
          },
        });
        for (const message of messages) {
          assert.equal((message.params ?? message.result)._meta[SUBSCRIPTION_ID], 'L-1');
        }
      } finally {
        await s.cleanup();
      }
    });

    test('a client that hangs up is freed at once, exactly once, and its slot is reusable', async () => {
      const s = await serve(flavour, { hub: { maxSubscriptions: 1 }, options: { keepAliveMs: 10 } });
      try {
        const stream = await s.open(1, { toolsListChanged: true, resourceSubscriptions: ['note://a'] });
        await stream.event(1);
        assert.equal(s.hub.stats().openStreams, 1);
        stream.close();
        await waitFor(() => s.hub.stats().openStreams === 0, 'the stream to be freed');
        const stats = s.hub.stats();
        assert.equal(stats.closed.client, 1);
        assert.equal(stats.listening.resourceUris, 0);
        assert.equal(stats.listening.toolsListChanged, 0);
        assert.equal(s.hub.resourceUpdated('note://a').matched, 0);

        const again = await s.open(2, { toolsListChanged: true });
        assert.equal(again.status, 200);
        await again.event(1);
        assert.equal(s.hub.stats().closed.client, 1);
      } finally {
        await s.cleanup();
      }
    });

    test('a client that hangs up while its URIs are being checked releases its slot', async () => {
      let calls = 0;
      let release!: () => void;
      const gate = new Promise<boolean>((resolve) => (release = () => resolve(true)));
      let serverSawClose = false;
      const observeClose: RequestHandler = (_req, res, next) => {
        res.on('close', () => (serverSawClose = true));
        next();
      };
      const s = await serve(flavour, {
        hub: { maxSubscriptions: 1 },
        before: [observeClose],
        options: {
          authorizeConcurrency: 1,
          canRead: (uri) => {
            if (uri === 'note://fast') return true;
            calls++;
            return gate;
          },
        },
      });
      try {
        const client = http.request(s.url, { method: 'POST', headers: listenHeaders(), agent: false });
        client.on('error', () => {}); // the test hangs up on purpose
        client.end(JSON.stringify(listenBody('slow', { resourceSubscriptions: ['note://slow/1', 'note://slow/2'] })));
        await waitFor(() => calls === 1, 'the first check');
        assert.equal(s.hub.stats().pendingStreams, 1);
        client.destroy(); // before any response byte
        await waitFor(() => serverSawClose, 'the server to see the hang-up');
        release();
        await waitFor(() => s.hub.stats().pendingStreams === 0, 'the reservation to be released');
        assert.equal(calls, 1, 'no check starts after the client left');
        const next = await s.open('next', { resourceSubscriptions: ['note://fast'] });
        assert.equal(next.status, 200);
        await next.event(1);
      } finally {
        await s.cleanup();
      }
    });

    test('capacity: 503 with Retry-After and -32603 "Subscription limit reached"; per principal too', async () => {
      const s = await serve(flavour, {
        hub: { maxSubscriptions: 2, maxSubscriptionsPerPrincipal: 1, retryAfterSeconds: 2 },
      });
      try {
        const alice = await s.open('a1', { toolsListChanged: true }, 'alice');
        await alice.event(1);
        const aliceAgain = await s.open('a2', { toolsListChanged: true }, 'alice');
        await aliceAgain.end();
        assert.equal(aliceAgain.status, 503);
        assert.equal(aliceAgain.headers['retry-after'], '2');
        assert.deepEqual(JSON.parse(aliceAgain.text), {
          jsonrpc: '2.0',
          id: 'a2',
          error: { code: -32603, message: 'Subscription limit reached' },
        });
        const bob = await s.open('b1', { toolsListChanged: true }, 'bob');
        assert.equal(bob.status, 200);
        await bob.event(1);
        const carol = await s.open('c1', { toolsListChanged: true }, 'carol');
        await carol.end();
        assert.equal(carol.status, 503);
        assert.equal(JSON.parse(carol.text).error.message, 'Subscription limit reached');
        assert.equal(s.hub.stats().refused, 2);
      } finally {
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: notifications/cancelled`, () => {
    for (const variant of ['no body parser', 'express.json() before'] as const) {
      test(`closes the same principal's stream with 202; another principal's is passed on (${variant})`, async () => {
        const s = await serve(flavour, {
          hub: { maxSubscriptionsPerPrincipal: 1 },
          before: variant === 'express.json() before' ? [flavour.express.json()] : [],
        });
        try {
          const stream = await s.open('L', { toolsListChanged: true }, 'alice');
          await stream.event(1);

          const foreign = await post(s.url, cancelBody('L'), { 'content-type': 'application/json', 'x-user': 'bob' });
          await foreign.end();
          assert.equal(foreign.status, 200);
          assert.deepEqual(JSON.parse(foreign.text), { passed: true });
          assert.deepEqual(s.passedOn, [{ method: 'notifications/cancelled', body: cancelBody('L'), user: 'bob' }]);
          assert.equal(s.hub.stats().openStreams, 1);
          assert.equal(s.hub.toolsListChanged().written, 1);
          await stream.event(2);

          const own = await post(s.url, cancelBody('L'), {
            'content-type': 'application/json',
            'mcp-method': 'notifications/cancelled',
            'x-user': 'alice',
          });
          await own.end();
          assert.equal(own.status, 202);
          assert.equal(own.text, '');
          // Freed synchronously: alice may listen again at once.
          assert.equal(s.hub.stats().openStreams, 0);
          assert.equal(s.hub.stats().closed.cancelled, 1);
          await stream.end();
          assert.equal(stream.events.length, 2, 'nothing more is written to a cancelled stream');
          const again = await s.open('L2', { toolsListChanged: true }, 'alice');
          assert.equal(again.status, 200);
          assert.equal(s.passedOn.length, 1);
        } finally {
          await s.cleanup();
        }
      });
    }

    test('a cancellation names the id verbatim: "1" does not cancel 1', async () => {
      const s = await serve(flavour);
      try {
        const stream = await s.open(1, { toolsListChanged: true });
        await stream.event(1);
        const wrongType = await post(s.url, cancelBody('1'), { 'content-type': 'application/json', 'x-user': 'alice' });
        await wrongType.end();
        assert.equal(wrongType.status, 200, 'passed on');
        assert.equal(s.hub.stats().openStreams, 1);
        const right = await post(s.url, cancelBody(1), { 'content-type': 'application/json', 'x-user': 'alice' });
        await right.end();
        assert.equal(right.status, 202);
        await stream.end();
      } finally {
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: backpressure with a client that stops reading`, () => {
    test('the queue stays within maxBuffer (drop-oldest), coalesces, and delivers the newest events on resume', async () => {
      const filler = `note://filler/${'f'.repeat(64 * 1024)}`;
      const targets = Array.from({ length: 8 }, (_, i) => `note://t/${i}`);
      const s = await serve(flavour, { hub: { maxBuffer: 4 } });
      try {
        const stream = await s.open('bp', { resourceSubscriptions: [filler, ...targets] });
        await stream.event(1);
        stream.pause();

        // Fill the socket: publish the big event until the stream has to queue.
        let written = 0;
        for (let i = 0; i < 2000; i++) {
          const report = s.hub.resourceUpdated(filler);
          written += report.written;
          if (report.queued === 1) break;
          assert.equal(report.written, 1);
        }
        assert.equal(s.hub.stats().queued, 1, 'the socket never pushed back');

        const reports = targets.map((uri) => s.hub.resourceUpdated(uri));
        const empty = { matched: 1, written: 0, queued: 1, coalesced: 0, dropped: 0, closed: 0 };
        assert.deepEqual(reports.slice(0, 3), [empty, empty, empty]);
        for (const report of reports.slice(3)) assert.deepEqual(report, { ...empty, dropped: 1 });
        assert.deepEqual(s.hub.resourceUpdated(targets[5]!), { ...empty, queued: 0, coalesced: 1 });
        assert.deepEqual(s.hub.resourceUpdated(targets[7]!), { ...empty, queued: 0, coalesced: 1 });
        const stats = s.hub.stats();
        assert.equal(stats.queued, 4);
        assert.equal(stats.dropped, 5);
        assert.equal(stats.coalesced, 2);

        stream.resume();
        await stream.until(() => stream.events.length === 1 + written + 4, 'the queued events', 15_000);
        const tail = stream.events.slice(1 + written).map((e) => e.json.params.uri);
        assert.deepEqual(tail, targets.slice(4));
        assert.ok(stream.events.slice(1, 1 + written).every((e) => e.json.params.uri === filler));

        // Nothing else was queued: the next message is the terminal result.
        await s.hub.close();
        await stream.end();
        assert.equal(stream.events.length, 1 + written + 4 + 1);
        assert.equal(stream.events.at(-1)?.json.result.resultType, 'complete');
      } finally {
        await s.cleanup();
      }
    });

    test('a queued task status is replaced by its newest state; repeated list changes merge', async () => {
      const state = (taskId: string, status: TaskState['status'], extra: Record<string, unknown> = {}): TaskState => ({
        taskId,
        status,
        createdAt: '2026-07-28T10:00:00Z',
        lastUpdatedAt: '2026-07-28T10:00:00Z',
        ttlMs: 60_000,
        ...extra,
      });
      const s = await serve(flavour);
      try {
        const stream = await s.open(
          'tasks',
          { toolsListChanged: true, taskIds: ['filler', 't1'] },
          'alice',
          TASKS_META,
        );
        const ack = await stream.event(1);
        assert.deepEqual(ack.json.params.notifications, { toolsListChanged: true, taskIds: ['filler', 't1'] });
        stream.pause();
        const big = state('filler', 'working', { statusMessage: 'x'.repeat(64 * 1024) });
        let written = 0;
        for (let i = 0; i < 2000; i++) {
          const report = s.hub.taskStatus(big, 'alice');
          written += report.written;
          if (report.queued === 1) break;
        }
        assert.equal(s.hub.stats().queued, 1, 'the socket never pushed back');

        assert.equal(s.hub.taskStatus(state('t1', 'working'), 'alice').queued, 1);
        assert.equal(s.hub.toolsListChanged().queued, 1);
        assert.equal(s.hub.taskStatus(state('t1', 'input_required'), 'alice').coalesced, 1);
        assert.equal(s.hub.toolsListChanged().coalesced, 1);
        const final = state('t1', 'completed', {
          lastUpdatedAt: '2026-07-28T10:09:00Z',
          result: { content: [{ type: 'text', text: 'ok' }] },
        });
        assert.equal(s.hub.taskStatus(final, 'alice').coalesced, 1);
        // bob's task of the same id never reaches alice's stream.
        assert.equal(s.hub.taskStatus(state('t1', 'failed'), 'bob').matched, 0);
        assert.equal(s.hub.stats().queued, 3);

        stream.resume();
        await stream.until(() => stream.events.length === 1 + written + 3, 'the queued events', 15_000);
        const tail = stream.events.slice(1 + written).map((e) => e.json);
        assert.deepEqual(
          tail.map((m) => m.method),
          ['notifications/tasks', 'notifications/tasks', 'notifications/tools/list_changed'],
        );
        assert.equal(tail[0].params.taskId, 'filler');
        assert.deepEqual(tail[1].params, { ...final, _meta: { [SUBSCRIPTION_ID]: 'tasks' } });
        await s.hub.close();
        await stream.end();
        assert.equal(stream.events.length, 1 + written + 3 + 1);
      } finally {
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: an open stream pins no request body`, () => {
    const gc = exposeGc();
    const bigUris = Array.from({ length: 1000 }, (_, i) => `note://alice/${i}/${'x'.repeat(2000)}`);

    for (const variant of ['no body parser', 'express.json() before'] as const) {
      test(`req.body is gone once the stream is open (${variant})`, async () => {
        let captured: Request | undefined;
        let sawBody = false;
        const capture: RequestHandler = (req, _res, next) => {
          captured = req;
          sawBody = req.body !== undefined;
          next();
        };
        const before =
          variant === 'express.json() before' ? [flavour.express.json({ limit: '4mb' }), capture] : [capture];
        const s = await serve(flavour, { before, options: { canRead: (uri) => uri === bigUris[0] } });
        try {
          const stream = await listen(s.url, 'big', { resourceSubscriptions: bigUris });
          const ack = await stream.event(1);
          assert.deepEqual(ack.json.params.notifications, { resourceSubscriptions: [bigUris[0]] });
          assert.equal(sawBody, variant === 'express.json() before');
          assert.ok(captured);
          assert.equal(captured.body, undefined);
          s.streams.push(stream);
        } finally {
          await s.cleanup();
        }
      });
    }

    test(
      'the parsed 2 MB body is collectable while the stream stays open',
      {
        skip:
          gc === undefined
            ? 'no way to run the garbage collector in this process (no --expose-gc, v8 flags locked)'
            : false,
      },
      async () => {
        let bodyRef: WeakRef<object> | undefined;
        const capture: RequestHandler = (req, _res, next) => {
          bodyRef = new WeakRef(req.body as object);
          next();
        };
        const s = await serve(flavour, {
          before: [flavour.express.json({ limit: '4mb' }), capture],
          options: { canRead: (uri) => uri === bigUris[0] },
        });
        try {
          const payload = JSON.stringify(listenBody('big', { resourceSubscriptions: bigUris }));
          assert.ok(payload.length > 2_000_000);
          const stream = await post(s.url, payload, listenHeaders());
          s.streams.push(stream);
          await stream.event(1);
          assert.equal(s.hub.stats().openStreams, 1);
          assert.ok(bodyRef);
          await new Promise((resolve) => setImmediate(resolve));
          gc!();
          assert.equal(bodyRef.deref(), undefined, 'the parsed body is still reachable from the open stream');
          // The stream still works after the collection.
          assert.equal(s.hub.resourceUpdated(bigUris[0]!).written, 1);
          await stream.event(2);
        } finally {
          await s.cleanup();
        }
      },
    );
  });
}
