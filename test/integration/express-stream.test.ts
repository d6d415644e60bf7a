/**
 * The Express middleware over real loopback sockets, on Express 5 and Express 4, read by a real SSE
 * client: the stream's frames and keepalives, hang-up and cancellation, capacity, a listen's life
 * before its stream opens (an ack whose wrapped write throws, a cancel while the checks run),
 * backpressure with a client that stops reading, and that an open stream pins neither `req.body` nor
 * the parsed body.
 */
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from '@jest/globals';
import type { Request, RequestHandler } from 'express';
import { SubscriptionHub, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsOptions } from 'mcp-subscriptions/express';
import {
  authFromUserHeader,
  expressFlavours,
  listenOn,
  type ExpressFlavour,
  type RunningServer,
} from '../helpers/express-apps.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { dechunk, rawListen, toolsFrameOf, updateFrameOf } from '../helpers/raw-http.ts';
import { exposeGc } from '../helpers/gc.ts';
import { testUnless } from '../helpers/skip.ts';
import { cancelBody, listen, listenBody, listenHeaders, post, TASKS_META, type SseStream } from '../helpers/sse.ts';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
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
    authFromUserHeader,
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

const CAFE = 'note://alice/café-☕';

const NO_PROC_NET_TCP = existsSync('/proc/net/tcp')
  ? undefined
  : 'reads the kernel socket table, /proc/net/tcp (Linux)';

/**
 * The states (hex, as the kernel writes them: 01 established, 04 FIN-WAIT-1, …) of every socket of the
 * server's port but its listener, from the kernel's own table: what the server's kernel still holds,
 * whatever Node has forgotten.
 */
function kernelStates(server: http.Server): string[] {
  const local = `:${(server.address() as AddressInfo).port.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter(([, address, , state]) => address?.endsWith(local) === true && state !== '0A')
    .map(([, , , state]) => state ?? '');
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
        expect(stream.status).toBe(200);
        expect(stream.headers['content-type']).toBe('text/event-stream');
        expect(stream.headers['cache-control']).toBe('no-cache, no-transform');
        expect(stream.headers['x-accel-buffering']).toBe('no');
        expect(stream.headers['mcp-session-id']).toBeUndefined();
        const ack = await stream.event(1);
        expect(ack.json).toStrictEqual({
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: {
            _meta: { [SUBSCRIPTION_ID]: 'L-1' },
            notifications: { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] },
          },
        });
        expect(
          stream.text.startsWith(
            'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged"',
          ),
        ).toBe(true);

        await stream.until(() => stream.comments.filter((c) => c === 'keepalive').length >= 2, 'two keepalives');
        expect(stream.text).toContain('\n\n: keepalive\n\n');

        expect(s.hub.toolsListChanged().written).toBe(1);
        expect(s.hub.resourceUpdated('note://alice/todo').written).toBe(1);
        // Prompts were not asked for.
        expect(s.hub.promptsListChanged().matched).toBe(0);
        await stream.event(3);
        await s.hub.close();
        await stream.end();
        const messages = stream.events.map((e) => e.json);
        expect(messages.map((m) => m.method ?? m.result?.resultType)).toStrictEqual([
          'notifications/subscriptions/acknowledged',
          'notifications/tools/list_changed',
          'notifications/resources/updated',
          'complete',
        ]);
        expect(messages[2].params).toStrictEqual({ uri: 'note://alice/todo', _meta: { [SUBSCRIPTION_ID]: 'L-1' } });
        expect(messages[3]).toStrictEqual({
          jsonrpc: '2.0',
          id: 'L-1',
          result: {
            resultType: 'complete',
            _meta: { [SUBSCRIPTION_ID]: 'L-1', 'io.modelcontextprotocol/serverInfo': { name: 'notes', version: '1' } },
          },
        });
        for (const message of messages) {
          expect((message.params ?? message.result)._meta[SUBSCRIPTION_ID]).toBe('L-1');
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
        expect(s.hub.stats().openStreams).toBe(1);
        stream.close();
        await waitFor(() => s.hub.stats().openStreams === 0, 'the stream to be freed');
        const stats = s.hub.stats();
        expect(stats.closed.client).toBe(1);
        expect(stats.listening.resourceUris).toBe(0);
        expect(stats.listening.toolsListChanged).toBe(0);
        expect(s.hub.resourceUpdated('note://a').matched).toBe(0);

        const again = await s.open(2, { toolsListChanged: true });
        expect(again.status).toBe(200);
        await again.event(1);
        expect(s.hub.stats().closed.client).toBe(1);
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
        expect(s.hub.stats().pendingStreams).toBe(1);
        client.destroy(); // before any response byte
        await waitFor(() => serverSawClose, 'the server to see the hang-up');
        release();
        await waitFor(() => s.hub.stats().pendingStreams === 0, 'the reservation to be released');
        // No check starts after the client left.
        expect(calls).toBe(1);
        const next = await s.open('next', { resourceSubscriptions: ['note://fast'] });
        expect(next.status).toBe(200);
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
        expect(aliceAgain.status).toBe(503);
        expect(aliceAgain.headers['retry-after']).toBe('2');
        expect(JSON.parse(aliceAgain.text)).toStrictEqual({
          jsonrpc: '2.0',
          id: 'a2',
          error: { code: -32603, message: 'Subscription limit reached' },
        });
        const bob = await s.open('b1', { toolsListChanged: true }, 'bob');
        expect(bob.status).toBe(200);
        await bob.event(1);
        const carol = await s.open('c1', { toolsListChanged: true }, 'carol');
        await carol.end();
        expect(carol.status).toBe(503);
        expect(JSON.parse(carol.text).error.message).toBe('Subscription limit reached');
        expect(s.hub.stats().refused).toBe(2);
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
          expect(foreign.status).toBe(200);
          expect(JSON.parse(foreign.text)).toStrictEqual({ passed: true });
          expect(s.passedOn).toStrictEqual([{ method: 'notifications/cancelled', body: cancelBody('L'), user: 'bob' }]);
          expect(s.hub.stats().openStreams).toBe(1);
          expect(s.hub.toolsListChanged().written).toBe(1);
          await stream.event(2);

          const own = await post(s.url, cancelBody('L'), {
            'content-type': 'application/json',
            'mcp-method': 'notifications/cancelled',
            'x-user': 'alice',
          });
          await own.end();
          expect(own.status).toBe(202);
          expect(own.text).toBe('');
          // Freed synchronously: alice may listen again at once.
          expect(s.hub.stats().openStreams).toBe(0);
          expect(s.hub.stats().closed.cancelled).toBe(1);
          await stream.end();
          // Nothing more is written to a cancelled stream.
          expect(stream.events.length).toBe(2);
          const again = await s.open('L2', { toolsListChanged: true }, 'alice');
          expect(again.status).toBe(200);
          expect(s.passedOn.length).toBe(1);
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
        // Passed on to the host handler.
        expect(wrongType.status).toBe(200);
        expect(s.hub.stats().openStreams).toBe(1);
        const right = await post(s.url, cancelBody(1), { 'content-type': 'application/json', 'x-user': 'alice' });
        await right.end();
        expect(right.status).toBe(202);
        await stream.end();
      } finally {
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: a listen's life before its stream opens`, () => {
    /** Host middleware whose wrapped `res.write` throws on its first call, for requests marked `x-break-write`. */
    const breakFirstWrite: RequestHandler = (req, res, next) => {
      if (req.get('x-break-write') !== undefined) {
        const write = res.write.bind(res) as (chunk: string) => boolean;
        let calls = 0;
        res.write = ((chunk: string) => {
          if (calls++ === 0) throw new Error('the wrapped write broke');
          return write(chunk);
        }) as typeof res.write;
      }
      next();
    };

    test('listens whose acknowledgement write throws fail alone: 32 of them do not lock their principal out', async () => {
      const s = await serve(flavour, { before: [breakFirstWrite] });
      try {
        const broken = await Promise.all(
          Array.from({ length: 32 }, (_, i) =>
            post(
              s.url,
              listenBody(`broken-${i}`, { toolsListChanged: true }),
              listenHeaders({ 'x-user': 'alice', 'x-break-write': '1' }),
            ).then(
              () => 'answered',
              (error: Error) => error.message,
            ),
          ),
        );
        // Nothing was sent (the headers go out with the first write): the connection is closed.
        expect(new Set(broken)).toStrictEqual(new Set(['socket hang up']));
        expect(s.hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0, opened: 32, closed: { failed: 32 } });
        const logger = s.hub.options.logger as ReturnType<typeof recordingLogger>;
        expect(logger.errors.map(([message]) => message)).toStrictEqual([
          expect.stringMatching(/^writing to a listen stream threw/),
        ]);

        // Alice's 32 slots are all hers: 32 listens are acknowledged, the 33rd refused for capacity.
        const streams = await Promise.all(
          Array.from({ length: 33 }, (_, i) => s.open(`L-${i}`, { toolsListChanged: true }, 'alice')),
        );
        const refused = streams.filter((stream) => stream.status === 503);
        expect(refused.length).toBe(1);
        await refused[0]!.end();
        expect(refused[0]!.headers['retry-after']).toBe('1');
        expect(JSON.parse(refused[0]!.text)).toMatchObject({
          error: { code: -32603, message: 'Subscription limit reached' },
        });
        const acked = streams.filter((stream) => stream.status === 200);
        expect(acked.length).toBe(32);
        for (const stream of acked) {
          expect((await stream.event(1)).json.method).toBe('notifications/subscriptions/acknowledged');
        }
        expect(s.hub.stats()).toMatchObject({ openStreams: 32, opened: 64 });

        // One goes: alice may listen again at once.
        acked[0]!.close();
        await waitFor(() => s.hub.stats().openStreams === 31, 'the closed stream freed');
        const again = await s.open('again', { toolsListChanged: true }, 'alice');
        expect(again.status).toBe(200);
        await again.event(1);
      } finally {
        await s.cleanup();
      }
    });

    test('a listen cancelled by its principal while its slow read check runs never opens; the cancel gets 202', async () => {
      let release!: (ok: boolean) => void;
      const checked = new Promise<boolean>((resolve) => (release = resolve));
      const signals: AbortSignal[] = [];
      const s = await serve(flavour, {
        options: {
          canRead: (_uri, context) => {
            signals.push(context.signal);
            return checked;
          },
        },
      });
      try {
        const listening = post(
          s.url,
          listenBody('slow', { resourceSubscriptions: ['note://alice/todo'] }),
          listenHeaders({ 'x-user': 'alice' }),
        );
        const outcome = listening.then(
          (stream) => `answered ${stream.status}`,
          (error: Error) => error.message,
        );
        await waitFor(() => signals.length === 1, 'the read check');
        expect(s.hub.stats().pendingStreams).toBe(1);

        // Bob naming alice's id cancels nothing: passed on to the host.
        const foreign = await post(s.url, cancelBody('slow'), { 'content-type': 'application/json', 'x-user': 'bob' });
        await foreign.end();
        expect(foreign.status).toBe(200);
        expect(s.hub.stats().pendingStreams).toBe(1);

        const own = await post(s.url, cancelBody('slow'), {
          'content-type': 'application/json',
          'mcp-method': 'notifications/cancelled',
          'x-user': 'alice',
        });
        await own.end();
        expect(own.status).toBe(202);
        expect(own.text).toBe('');
        // The listen's response ends with nothing written: not even its headers.
        expect(await outcome).toBe('socket hang up');
        expect(signals[0]!.aborted).toBe(true);
        expect(s.hub.stats()).toMatchObject({
          openStreams: 0,
          pendingStreams: 0,
          opened: 1,
          closed: { cancelled: 1 },
        });

        // The check answering late opens nothing.
        release(true);
        const probe = await s.open('probe', { toolsListChanged: true }, 'alice');
        await probe.event(1);
        expect(s.hub.stats()).toMatchObject({ openStreams: 1, opened: 2 });
        expect(s.passedOn.map((passed) => passed.user)).toStrictEqual(['bob']);
      } finally {
        release(true);
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: backpressure with a client that stops reading`, () => {
    test('many keys queued: nothing is dropped, repeats coalesce, and resume delivers the latest of every key', async () => {
      const filler = `note://filler/${'f'.repeat(64 * 1024)}`;
      const targets = Array.from({ length: 8 }, (_, i) => `note://t/${i}`);
      const s = await serve(flavour);
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
          expect(report.written).toBe(1);
        }
        // If not, the socket never pushed back.
        expect(s.hub.stats().queued).toBe(1);

        const reports = targets.map((uri) => s.hub.resourceUpdated(uri));
        const empty = { matched: 1, written: 0, queued: 1, coalesced: 0 };
        for (const report of reports) expect(report).toStrictEqual(empty);
        expect(s.hub.resourceUpdated(targets[5]!)).toStrictEqual({ ...empty, queued: 0, coalesced: 1 });
        expect(s.hub.resourceUpdated(targets[7]!)).toStrictEqual({ ...empty, queued: 0, coalesced: 1 });
        const stats = s.hub.stats();
        expect(stats.queued).toBe(9); // one per key followed
        expect(stats.dropped).toBe(0);
        expect(stats.coalesced).toBe(2);

        stream.resume();
        await stream.until(() => stream.events.length === 1 + written + 9, 'the queued events', 15_000);
        const tail = stream.events.slice(1 + written).map((e) => e.json.params.uri);
        expect(tail).toStrictEqual([filler, ...targets]);
        expect(stream.events.slice(1, 1 + written).every((e) => e.json.params.uri === filler)).toBeTruthy();

        // Nothing else was queued: the next message is the terminal result.
        await s.hub.close();
        await stream.end();
        expect(stream.events.length).toBe(1 + written + 9 + 1);
        expect(stream.events.at(-1)?.json.result.resultType).toBe('complete');
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
        expect(ack.json.params.notifications).toStrictEqual({ toolsListChanged: true, taskIds: ['filler', 't1'] });
        stream.pause();
        const big = state('filler', 'working', { statusMessage: 'x'.repeat(64 * 1024) });
        let written = 0;
        for (let i = 0; i < 2000; i++) {
          const report = s.hub.taskStatus(big, 'alice');
          written += report.written;
          if (report.queued === 1) break;
        }
        // If not, the socket never pushed back.
        expect(s.hub.stats().queued).toBe(1);

        expect(s.hub.taskStatus(state('t1', 'working'), 'alice').queued).toBe(1);
        expect(s.hub.toolsListChanged().queued).toBe(1);
        expect(s.hub.taskStatus(state('t1', 'input_required'), 'alice').coalesced).toBe(1);
        expect(s.hub.toolsListChanged().coalesced).toBe(1);
        const final = state('t1', 'completed', {
          lastUpdatedAt: '2026-07-28T10:09:00Z',
          result: { content: [{ type: 'text', text: 'ok' }] },
        });
        expect(s.hub.taskStatus(final, 'alice').coalesced).toBe(1);
        // bob's task of the same id never reaches alice's stream.
        expect(s.hub.taskStatus(state('t1', 'failed'), 'bob').matched).toBe(0);
        expect(s.hub.stats().queued).toBe(3);

        stream.resume();
        await stream.until(() => stream.events.length === 1 + written + 3, 'the queued events', 15_000);
        const tail = stream.events.slice(1 + written).map((e) => e.json);
        expect(tail.map((m) => m.method)).toStrictEqual([
          'notifications/tasks',
          'notifications/tasks',
          'notifications/tools/list_changed',
        ]);
        expect(tail[0].params.taskId).toBe('filler');
        expect(tail[1].params).toStrictEqual({ ...final, _meta: { [SUBSCRIPTION_ID]: 'tasks' } });
        await s.hub.close();
        await stream.end();
        expect(stream.events.length).toBe(1 + written + 3 + 1);
      } finally {
        await s.cleanup();
      }
    });
  });

  describe(`${flavour.name}: a client that takes no byte is cut off with a reset`, () => {
    for (const ending of ['closed as stalled', 'cut off by complete()'] as const) {
      testUnless(NO_PROC_NET_TCP)(
        `${ending}: the server's kernel keeps no socket for it, and the client gets no terminal result`,
        async () => {
          const s = await serve(flavour, {
            hub:
              ending === 'closed as stalled'
                ? { stallTimeoutMs: 200 }
                : { stallTimeoutMs: false, completeTimeoutMs: 200 },
          });
          try {
            const filler = `note://filler/${'f'.repeat(64 * 1024)}`;
            const stream = await s.open('stuck', { resourceSubscriptions: [filler] });
            await stream.event(1);
            stream.pause();
            // Until the socket stays full: a write of 16 KiB or more reports "full" until Node hands it
            // to the kernel, a turn later, so a queued event alone does not say the kernel is full.
            const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
            for (let i = 0; i < 2000 && s.hub.stats().queued === 0; i++) {
              s.hub.resourceUpdated(filler);
              await turn();
              await turn();
            }
            // If not, the socket never pushed back.
            expect(s.hub.stats().queued).toBe(1);
            expect(kernelStates(s.server.server)).toStrictEqual(['01']); // established, its buffers full

            if (ending === 'closed as stalled') {
              await waitFor(() => s.hub.stats().closed.stalled === 1, 'the stall timeout');
            } else {
              await s.hub.complete();
              expect(s.hub.stats().cutOff).toBe(1);
            }
            // A plain close left the socket in FIN-WAIT-1 (04) with every unsent byte, for minutes:
            // the kernel kept the buffers the stall timeout is there to free.
            await waitFor(
              () => kernelStates(s.server.server).length === 0,
              'no server socket left in the kernel',
              2000,
            );

            stream.resume();
            await stream.end();
            expect(stream.events.some((event) => event.json?.result !== undefined)).toBe(false);
          } finally {
            await s.cleanup();
          }
        },
      );
    }
  });

  describe(`${flavour.name}: the bytes on the socket`, () => {
    test('HTTP/1.1: every batch is one chunk whose size is its length in bytes, non-ASCII URIs included', async () => {
      const s = await serve(flavour);
      const raw = await rawListen(
        s.url,
        '1.1',
        listenBody('raw', { toolsListChanged: true, resourceSubscriptions: [CAFE] }),
        listenHeaders({ 'x-user': 'alice' }),
      );
      try {
        await raw.until((text) => text.includes('acknowledged'), 'the ack');
        s.hub.toolsListChanged();
        await raw.until((text) => text.includes('list_changed'), 'the tools event');
        s.hub.resourceUpdated(CAFE);
        s.hub.resourceUpdated(CAFE); // the same tick: one batch, one chunk
        await raw.until((text) => text.split('resources/updated').length === 3, 'both updates');
        await s.hub.close();
        const { head, body } = await raw.ended();
        expect(head).toMatch(/^HTTP\/1\.1 200 /);
        expect(head.toLowerCase()).toContain('transfer-encoding: chunked');
        const chunks = dechunk(body);
        const frames = chunks.map((chunk) => chunk.toString('utf8'));
        expect(frames).toHaveLength(4); // ack, tools, both updates in one write, the result
        expect(frames[1]).toBe(toolsFrameOf('raw'));
        expect(frames[2]).toBe(updateFrameOf(CAFE, 'raw').repeat(2));
        expect(JSON.parse(frames[3]!.slice('event: message\ndata: '.length)).result.resultType).toBe('complete');
      } finally {
        raw.destroy();
        await s.cleanup();
      }
    });

    test('HTTP/1.0 (no chunked encoding): the same frames, written through the response, end with the connection', async () => {
      const s = await serve(flavour);
      const raw = await rawListen(
        s.url,
        '1.0',
        listenBody('old', { toolsListChanged: true }),
        listenHeaders({ 'x-user': 'alice' }),
      );
      try {
        await raw.until((text) => text.includes('acknowledged'), 'the ack');
        s.hub.toolsListChanged();
        await raw.until((text) => text.includes('list_changed'), 'the tools event');
        await s.hub.close();
        const { head, body } = await raw.ended();
        expect(head.toLowerCase()).not.toContain('transfer-encoding');
        const text = body.toString('utf8');
        expect(text.slice(text.indexOf('\n\n') + 2).startsWith(toolsFrameOf('old'))).toBe(true);
        expect(
          text.endsWith('"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"old"}}}\n\n'),
        ).toBe(true);
      } finally {
        raw.destroy();
        await s.cleanup();
      }
    });

    test('a middleware that wraps res.write (compression, logging) sees every frame: the stream writes through it', async () => {
      const seen: string[] = [];
      const wrapWrite: RequestHandler = (_req, res, next) => {
        const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
        res.write = ((chunk: unknown, ...rest: unknown[]) => {
          seen.push(String(chunk));
          return write(chunk, ...rest);
        }) as typeof res.write;
        next();
      };
      const s = await serve(flavour, { before: [wrapWrite] });
      try {
        const stream = await s.open('wrapped', { toolsListChanged: true });
        await stream.event(1);
        s.hub.toolsListChanged();
        await stream.event(2);
        s.hub.toolsListChanged();
        await stream.event(3);
        expect(seen.slice(1)).toStrictEqual([toolsFrameOf('wrapped'), toolsFrameOf('wrapped')]);
      } finally {
        await s.cleanup();
      }
    });

    test('a write that throws (a wrapped res.write) ends that stream only: the others get every event, publish() returns, logged once', async () => {
      // The faulty principal's responses throw on every frame after the acknowledgement.
      const faultyWrite: RequestHandler = (req, res, next) => {
        if (req.get('x-user') === 'faulty') {
          const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
          res.write = ((chunk: unknown, ...rest: unknown[]) => {
            if (String(chunk).includes('list_changed')) throw new Error('a middleware bug');
            return write(chunk, ...rest);
          }) as typeof res.write;
        }
        next();
      };
      const s = await serve(flavour, { before: [faultyWrite] });
      try {
        // Opened in this order, so the faulty streams sit between the good ones in every index.
        const good1 = await s.open('g1', { toolsListChanged: true }, 'alice');
        const faulty1 = await s.open('f1', { toolsListChanged: true }, 'faulty');
        const good2 = await s.open('g2', { toolsListChanged: true }, 'bob');
        const faulty2 = await s.open('f2', { toolsListChanged: true }, 'faulty');
        for (const stream of [good1, faulty1, good2, faulty2]) await stream.event(1);

        expect(s.hub.toolsListChanged()).toMatchObject({ matched: 4 });
        await good1.event(2);
        await good2.event(2);
        await faulty1.end();
        await faulty2.end();
        expect(faulty1.events.length + faulty2.events.length).toBe(2); // their acks only
        // The tick's flush and the fan-out go on for everyone else.
        s.hub.toolsListChanged();
        await good1.event(3);
        await good2.event(3);
        for (const good of [good1, good2]) {
          expect(good.events.slice(1).map((e) => e.json?.method)).toStrictEqual([
            'notifications/tools/list_changed',
            'notifications/tools/list_changed',
          ]);
        }

        const stats = s.hub.stats();
        expect(stats.closed.failed).toBe(2);
        expect(stats.openStreams).toBe(2);
        const logger = s.hub.options.logger as ReturnType<typeof recordingLogger>;
        expect(logger.errors).toHaveLength(1);
        expect(String(logger.errors[0]![0])).toContain('`failed`');
        expect((logger.errors[0]![1] as { error: Error }).error.message).toBe('a middleware bug');
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
          expect(ack.json.params.notifications).toStrictEqual({ resourceSubscriptions: [bigUris[0]] });
          expect(sawBody).toBe(variant === 'express.json() before');
          expect(captured).toBeTruthy();
          expect(captured!.body).toBeUndefined();
          s.streams.push(stream);
        } finally {
          await s.cleanup();
        }
      });
    }

    testUnless(
      gc === undefined
        ? 'no way to run the garbage collector in this process (no --expose-gc, v8 flags locked)'
        : undefined,
    )('the parsed 2 MB body is collectable while the stream stays open', async () => {
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
        expect(payload.length).toBeGreaterThan(2_000_000);
        const stream = await post(s.url, payload, listenHeaders());
        s.streams.push(stream);
        await stream.event(1);
        expect(s.hub.stats().openStreams).toBe(1);
        expect(bodyRef).toBeTruthy();
        await new Promise((resolve) => setImmediate(resolve));
        gc!();
        // If not, the parsed body is still reachable from the open stream.
        expect(bodyRef!.deref()).toBeUndefined();
        // The stream still works after the collection.
        expect(s.hub.resourceUpdated(bigUris[0]!).written).toBe(1);
        await stream.event(2);
      } finally {
        await s.cleanup();
      }
    });
  });
}
