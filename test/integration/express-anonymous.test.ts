/**
 * Anonymous callers over real loopback sockets, on Express 5 and Express 4: each anonymous listen has
 * an identity of its own, so no anonymous caller cancels another's stream or follows another's task;
 * anonymous callers together count as one principal for the per-principal limit; and a user whose id
 * is literally `anonymous` is a principal like any other, outside that pool.
 */
import { describe, expect, test } from '@jest/globals';
import { SubscriptionHub, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsOptions } from 'mcp-subscriptions/express';
import { authFromUserHeader, expressFlavours, listenOn, type ExpressFlavour } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { cancelBody, listenBody, listenHeaders, post, TASKS_META, type SseStream } from '../helpers/sse.ts';

function task(taskId: string): TaskState {
  const now = new Date().toISOString();
  return { taskId, status: 'completed', createdAt: now, lastUpdatedAt: now, ttlMs: null };
}

async function serve(
  flavour: ExpressFlavour,
  hubOptions: ConstructorParameters<typeof SubscriptionHub>[0] = {},
  options: Partial<McpSubscriptionsOptions> = {},
) {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger, ...hubOptions });
  const passedOn: unknown[] = [];
  const principals: string[] = [];
  const app = flavour.express();
  app.post(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({
      hub,
      capabilities: { toolsListChanged: true, tasks: true },
      canAccessTask: (_taskId, { principal }) => {
        principals.push(principal);
        return true;
      },
      keepAliveMs: false,
      ...options,
    }),
    (req, res) => {
      passedOn.push(req.body);
      res.status(200).json({ passed: true });
    },
  );
  const server = await listenOn(app);
  const streams: SseStream[] = [];
  return {
    hub,
    logger,
    passedOn,
    principals,
    async open(id: string | number, notifications: Record<string, unknown>, user?: string): Promise<SseStream> {
      const headers = listenHeaders(user === undefined ? {} : { 'x-user': user });
      const stream = await post(server.url, listenBody(id, notifications, TASKS_META), headers);
      streams.push(stream);
      return stream;
    },
    async cancel(id: string | number, user?: string): Promise<SseStream> {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (user !== undefined) headers['x-user'] = user;
      const answer = await post(server.url, cancelBody(id), headers);
      await answer.end();
      return answer;
    },
    async cleanup() {
      for (const stream of streams) stream.close();
      await hub.close();
      await server.close();
    },
  };
}

for (const flavour of expressFlavours) {
  describe(`${flavour.name}: anonymous callers`, () => {
    test("an anonymous cancel closes nobody's stream, and goes on to the host; a named user's closes its own", async () => {
      const s = await serve(flavour);
      try {
        const first = await s.open('listen:1', { toolsListChanged: true });
        const second = await s.open('listen:1', { toolsListChanged: true });
        const named = await s.open('listen:1', { toolsListChanged: true }, 'anonymous');
        for (const stream of [first, second, named]) await stream.event(1);
        expect(s.hub.stats().openStreams).toBe(3);

        const anonymousCancel = await s.cancel('listen:1');
        // Not ours: the host's MCP server receives the notification as it would without the middleware.
        expect(anonymousCancel.text).toBe('{"passed":true}');
        expect(s.passedOn).toStrictEqual([cancelBody('listen:1')]);
        expect(s.hub.stats().closed.cancelled).toBe(0);

        // The user whose id is literally "anonymous" is a principal of its own: its cancel closes its stream only.
        const namedCancel = await s.cancel('listen:1', 'anonymous');
        expect(namedCancel.status).toBe(202);
        await named.end();
        expect(s.hub.stats().closed.cancelled).toBe(1);
        expect(s.hub.stats().openStreams).toBe(2);
        expect(first.ended || second.ended).toBe(false);
      } finally {
        await s.cleanup();
      }
    });

    test('anonymous callers share no task: an event for the owner "anonymous" reaches the user "anonymous" only', async () => {
      const s = await serve(flavour);
      try {
        const first = await s.open('a', { toolsListChanged: true, taskIds: ['t-1'] });
        const second = await s.open('b', { toolsListChanged: true, taskIds: ['t-1'] });
        const named = await s.open('c', { toolsListChanged: true, taskIds: ['t-1'] }, 'anonymous');
        for (const stream of [first, second, named]) {
          expect((await stream.event(1)).json?.params?.notifications).toStrictEqual({
            toolsListChanged: true,
            taskIds: ['t-1'],
          });
        }
        // Each anonymous check saw an identity of its own, which is not the user's.
        const [a, b, c] = s.principals;
        expect(new Set([a, b, c]).size).toBe(3);
        expect(c).toBe('anonymous');

        s.hub.taskStatus(task('t-1'), 'anonymous');
        // A sentinel after it: a stream that got the task's event would see it first.
        s.hub.toolsListChanged();
        for (const stream of [first, second]) {
          expect((await stream.event(2)).json?.method).toBe('notifications/tools/list_changed');
        }
        expect((await named.event(2)).json?.method).toBe('notifications/tasks');
        expect((await named.event(3)).json?.method).toBe('notifications/tools/list_changed');
      } finally {
        await s.cleanup();
      }
    });

    test('anonymous callers together are one principal for maxSubscriptionsPerPrincipal; named users are not in that pool', async () => {
      const s = await serve(flavour, { maxSubscriptionsPerPrincipal: 2 });
      try {
        const first = await s.open(1, { toolsListChanged: true });
        const second = await s.open(2, { toolsListChanged: true });
        const third = await s.open(3, { toolsListChanged: true });
        expect([first.status, second.status, third.status]).toStrictEqual([200, 200, 503]);
        expect(third.headers['retry-after']).toBe('1');
        const named = await s.open(4, { toolsListChanged: true }, 'anonymous');
        const alice = await s.open(5, { toolsListChanged: true }, 'alice');
        expect([named.status, alice.status]).toStrictEqual([200, 200]);
        expect(s.hub.stats()).toMatchObject({ openStreams: 4, principals: 3, maxOpenPerPrincipal: 2 });
        expect(s.hub.openByPrincipal()).toStrictEqual({ anonymous: 1, alice: 1 });
        // A slot an anonymous caller gives back is free for the next anonymous caller.
        first.close();
        await first.end();
        const again = await s.open(6, { toolsListChanged: true });
        expect(again.status).toBe(200);
      } finally {
        await s.cleanup();
      }
    });

    test('a principal with a NUL character, or not a string, is the host mistake: 500, logged', async () => {
      for (const value of ['\u0000anonymous', 42]) {
        const s = await serve(flavour, {}, { principal: () => value as string });
        try {
          const refused = await s.open('p', { toolsListChanged: true });
          await refused.end();
          expect(refused.status).toBe(500);
          expect(JSON.parse(refused.text).error.code).toBe(-32603);
          expect(s.logger.errors.map(([message]) => message).join('\n')).toMatch(/`principal` returned/);
          expect(s.hub.stats().opened).toBe(0);
        } finally {
          await s.cleanup();
        }
      }
    });
  });
}
