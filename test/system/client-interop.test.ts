/**
 * The listen client against real servers: both sample apps (each a child process, over loopback, as
 * `npm start` runs it), the official SDK's own listen (`createMcpHandler`, served by `toNodeHandler`),
 * and a consuming service that re-listens across a restart of the sample on the same port. Each test
 * reads the way a host app's test would: open, trigger a change, assert the notification.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer, type McpHttpHandler } from '@modelcontextprotocol/server';
import { ErrorCode } from 'mcp-subscriptions';
import { listen, type ListenError, type SubscriptionItem } from 'mcp-subscriptions/client';
import { bearer } from '../helpers/bearer.ts';
import { startSample, stopAllSamples, TOKENS, type SampleApp } from '../helpers/sample-app.ts';
import { uid } from '../helpers/uid.ts';

const UPDATED = 'notifications/resources/updated';
const TOOLS = 'notifications/tools/list_changed';
const TASK = 'notifications/tasks';

const as = (token: string) => ({ headers: bearer(token) });

const SAMPLES = ['express', 'nest'] as const;
/** Spawning costs about a second each: both start at once, and each block awaits its own. */
const starting = {} as Record<(typeof SAMPLES)[number], Promise<SampleApp>>;

beforeAll(() => {
  for (const kind of SAMPLES) {
    starting[kind] = startSample(kind);
    starting[kind].catch(() => {}); // reported by the block that awaits it
  }
});

// Killed, not stopped: their graceful shutdown is the business of the contract and shutdown suites.
afterAll(stopAllSamples);

for (const kind of SAMPLES) {
  describe(`against the ${kind} sample`, () => {
    let app: SampleApp;
    beforeAll(async () => {
      app = await starting[kind];
    }, 60_000);

    it('a REST change reaches the listener: open, trigger, assert, in five lines', async () => {
      const subscription = await listen(app.url, { resourceSubscriptions: ['note://alice/todo'] }, as(TOKENS.alice));
      await app.api(TOKENS.alice, 'PUT', '/api/notes/alice/todo', { text: 'milk' });
      const update = await subscription.waitFor(UPDATED);
      expect(update.params.uri).toBe('note://alice/todo');
      await subscription.close();
    });

    it("the honoured filter leaves out what the caller may not read; the app's own 401 is a refusal with its status", async () => {
      const n = uid('mixed');
      const subscription = await listen(
        app.url,
        { toolsListChanged: true, resourceSubscriptions: [`note://alice/${n}`, `note://bob/${n}`] },
        as(TOKENS.alice),
      );
      expect(subscription.honored).toStrictEqual({
        toolsListChanged: true,
        resourceSubscriptions: [`note://alice/${n}`],
      });
      await app.api(TOKENS.bob, 'POST', '/api/catalog/tools');
      await subscription.waitFor(TOOLS);
      await subscription.close();
      const refused = (await listen(app.url, { toolsListChanged: true }).catch(
        (error: unknown) => error,
      )) as ListenError;
      expect(refused).toMatchObject({ code: ErrorCode.ListenRefused, status: 401, rpcCode: undefined });
    });

    it('taskIds: the client declares the Tasks extension by itself, and each status change arrives with the full state', async () => {
      const { body } = await app.api(TOKENS.alice, 'POST', '/api/tasks');
      const subscription = await listen(app.url, { taskIds: [body.taskId] }, as(TOKENS.alice));
      expect(subscription.honored).toStrictEqual({ taskIds: [body.taskId] });
      await app.api(TOKENS.alice, 'POST', `/api/tasks/${body.taskId}/status`, { status: 'completed' });
      expect((await subscription.waitFor(TASK)).params).toMatchObject({ taskId: body.taskId, status: 'completed' });
      await subscription.close();
    });
  });
}

describe("against the official SDK's own listen (createMcpHandler)", () => {
  let handler: McpHttpHandler;
  let server: Server;
  let url: string;
  beforeAll(async () => {
    handler = createMcpHandler(
      () =>
        new McpServer(
          { name: 'sdk-listen', version: '1.0.0' },
          { capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true } } },
        ),
      { legacy: 'reject', maxSubscriptions: 2, onerror: () => {} },
    );
    const serve = toNodeHandler(handler);
    server = createServer((req, res) => {
      serve(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(async () => {
    await handler?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('handler.notify reaches the listener: open, trigger, assert, in five lines', async () => {
    const subscription = await listen(url, { resourceSubscriptions: ['file:///notes/todo'] });
    handler.notify.resourceUpdated('file:///notes/todo');
    const update = await subscription.waitFor(UPDATED);
    expect(update.params.uri).toBe('file:///notes/todo');
    await subscription.close();
  });

  it('its in-band capacity refusal (-32603 in an HTTP 200) rejects; its shutdown ends a subscription as complete', async () => {
    const first = await listen(url, { toolsListChanged: true, promptsListChanged: true });
    expect(first.honored).toStrictEqual({ toolsListChanged: true }); // no prompts capability
    const second = await listen(url, { toolsListChanged: true });
    const refused = (await listen(url, { toolsListChanged: true }).catch((error: unknown) => error)) as ListenError;
    expect(refused).toMatchObject({ code: ErrorCode.ListenRefused, status: 200, rpcCode: -32603 });
    await second.close();
    handler.notify.toolsChanged();
    await first.waitFor(TOOLS);
    await handler.close();
    expect(await first.ended).toBe('complete');
  });
});

describe('a consuming service with reconnect on', () => {
  it('survives a restart of the server on the same port, learns that it may have missed events, and goes on', async () => {
    const before = await starting.express; // its last user: this test stops it
    const name = uid('restart');
    const uri = `note://alice/${name}`;
    const path = `/api/notes/alice/${name}`;
    const subscription = await listen(
      before.url,
      { resourceSubscriptions: [uri] },
      { ...as(TOKENS.alice), reconnect: { initialDelayMs: 50, maxDelayMs: 250 } },
    );
    const items = subscription[Symbol.asyncIterator]();
    try {
      await before.api(TOKENS.alice, 'PUT', path, { text: 'before' });
      expect(((await items.next()).value as SubscriptionItem).type).toBe('notification');

      // SIGTERM: the sample completes every stream, then exits; the subscription keeps trying meanwhile.
      const code = await before.stop();
      expect({ code, stderr: code === 0 ? '' : before.stderr() }).toStrictEqual({ code: 0, stderr: '' });
      const after = await startSample('express', { PORT: new URL(before.url).port });
      expect(after.url).toBe(before.url);
      const gap = (await items.next()).value as SubscriptionItem;
      expect(gap).toStrictEqual({
        type: 'gap',
        reason: 'complete',
        honored: { resourceSubscriptions: [uri] },
        attempts: expect.any(Number),
      });
      expect(subscription.endReason).toBe(undefined);

      await after.api(TOKENS.alice, 'PUT', path, { text: 'after' });
      expect((await subscription.waitFor(UPDATED)).params.uri).toBe(uri);
    } finally {
      await subscription.close();
    }
  }, 90_000); // two sample starts (startSample allows each 30 s) and a stop
});
