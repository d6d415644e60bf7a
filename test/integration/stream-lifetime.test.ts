/**
 * Streams that end on purpose, over loopback HTTP on an Express app: `maxStreamDurationMs` ends a
 * stream with its terminal result and the package's client (and the official one) take it as routine
 * and listen again with no error; `hub.drain()` refuses new listens with 503 + `Retry-After` and ends
 * the open streams gracefully, one after the other rather than all at once.
 */
import { afterEach, describe, expect, test } from '@jest/globals';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import express from 'express';
import { SubscriptionHub, toServerCapabilities } from 'mcp-subscriptions';
import { listen as subscribe, type SubscriptionItem } from 'mcp-subscriptions/client';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { authFromUserHeader, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

const OFFER = { toolsListChanged: true } as const;
const ACK = 'notifications/subscriptions/acknowledged';
const TOOLS = 'notifications/tools/list_changed';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

interface Served {
  readonly hub: SubscriptionHub;
  readonly server: RunningServer;
  readonly url: string;
  close(): Promise<void>;
}

const running: Served[] = [];
afterEach(async () => {
  for (const served of running.splice(0)) await served.close();
});

/** An Express app as a host mounts it: auth, listen in front, the official SDK's handler for the rest of MCP. */
async function serve(hubOptions: ConstructorParameters<typeof SubscriptionHub>[0]): Promise<Served> {
  const hub = new SubscriptionHub({ logger: recordingLogger(), ...hubOptions });
  const mcp = createMcpHandler(
    () => new McpServer({ name: 'lifetime-host', version: '1.0.0' }, { capabilities: toServerCapabilities(OFFER) }),
    { bus: hub, legacy: 'reject' },
  );
  const node = toNodeHandler(mcp);
  const app = express();
  app.all(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({ hub, capabilities: OFFER, keepAliveMs: false }),
    (req, res, next) => node(req, res, req.body).catch(next),
  );
  const server = await listenOn(app);
  const served: Served = {
    hub,
    server,
    url: server.url,
    close: async () => {
      await hub.close();
      await mcp.close();
      await server.close();
    },
  };
  running.push(served);
  return served;
}

/** The stream's last message: the terminal result for its own id, nothing after it. */
function expectTerminalResult(stream: SseStream, id: string | number): void {
  expect(stream.events.at(-1)?.json).toStrictEqual({
    jsonrpc: '2.0',
    id,
    result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: id } },
  });
}

describe('maxStreamDurationMs', () => {
  test('a stream ends with its terminal result after the limit; nothing is written after it', async () => {
    const { hub, url } = await serve({ maxStreamDurationMs: 300 });
    const stream = await listen(url, 'expiring', { toolsListChanged: true }, { 'x-user': 'alice' });
    expect(stream.status).toBe(200);
    expect((await stream.event(1)).json?.method).toBe(ACK);
    hub.toolsListChanged();
    await stream.end(); // the limit's bound: within 5 s, for a 300 ms limit
    expect(stream.events.map((e) => e.json?.method ?? 'result')).toStrictEqual([ACK, TOOLS, 'result']);
    expectTerminalResult(stream, 'expiring');
    expect(hub.stats().closed).toMatchObject({ expired: 1, client: 0 });
  });

  test("the package's client listens again as routine: a gap of reason complete, no error, no backoff growth", async () => {
    const { hub, url } = await serve({ maxStreamDurationMs: 300 });
    const subscription = await subscribe(
      url,
      { toolsListChanged: true },
      // A first step far longer than the test: a graceful end must not wait for a backoff step.
      { headers: { 'x-user': 'alice' }, reconnect: { initialDelayMs: 200, maxDelayMs: 60_000 }, id: 'rotating' },
    );
    try {
      const items: SubscriptionItem[] = [];
      for await (const item of subscription) {
        items.push(item);
        if (items.filter((i) => i.type === 'gap').length === 3) break;
      }
      // Three rounds, each one attempt: the backoff restarted every time, and nothing failed.
      expect(items).toStrictEqual(
        Array.from({ length: 3 }, () => ({
          type: 'gap',
          reason: 'complete',
          honored: { toolsListChanged: true },
          attempts: 1,
        })),
      );
      expect(subscription.error).toBeUndefined();
      expect(subscription.reconnects).toBe(3);
      expect(hub.stats().closed.expired).toBeGreaterThanOrEqual(3);
      expect(hub.stats().refusals).toMatchObject({ capacity: 0, draining: 0, internal: 0 });
    } finally {
      await subscription.close();
    }
  });

  test("the official client's listen ends as graceful", async () => {
    const { url } = await serve({ maxStreamDurationMs: 300 });
    const client = new Client(
      { name: 'lifetime-interop', version: '0.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { 'x-user': 'alice' } } }),
    );
    try {
      const subscription = await client.listen({ toolsListChanged: true });
      expect(subscription.honoredFilter).toStrictEqual({ toolsListChanged: true });
      expect(await subscription.closed).toBe('graceful');
    } finally {
      await client.close();
    }
  });
});

describe('hub.drain()', () => {
  test('new listens get 503 + Retry-After; the open streams all end gracefully, one after the other; then it resolves', async () => {
    const { hub, url } = await serve({ retryAfterSeconds: 2 });
    const count = 8;
    const streams: SseStream[] = [];
    for (let i = 0; i < count; i++) {
      const stream = await listen(url, i % 2 === 0 ? i : `s-${i}`, { toolsListChanged: true }, { 'x-user': `u${i}` });
      expect((await stream.event(1)).json?.method).toBe(ACK);
      streams.push(stream);
    }

    const order: number[] = [];
    for (const [i, stream] of streams.entries()) void stream.end(10_000).then(() => order.push(i));
    // One stream every 250 ms: the first at once.
    const drained = hub.drain({ overMs: count * 250 });
    let resolved = false;
    void drained.then(() => (resolved = true));
    expect(hub.stats().draining).toBe(true);

    const refused = await listen(url, 'late', { toolsListChanged: true }, { 'x-user': 'late' });
    await refused.end();
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('2');
    expect(JSON.parse(refused.text)).toStrictEqual({
      jsonrpc: '2.0',
      id: 'late',
      error: { code: -32603, message: 'Server is draining' },
    });

    // Spread: when the first stream has its result, the others are still open, and take events.
    await streams[0]!.end();
    expect(streams.slice(1).every((stream) => !stream.ended)).toBe(true);
    expect(hub.stats().openStreams).toBe(count - 1);
    hub.toolsListChanged();
    await streams.at(-1)!.until(() => streams.at(-1)!.events.some((e) => e.json?.method === TOOLS), 'the tools change');
    expect(resolved).toBe(false);

    await drained;
    for (const [i, stream] of streams.entries()) {
      await stream.end();
      expectTerminalResult(stream, i % 2 === 0 ? i : `s-${i}`);
    }
    // Oldest first.
    expect(order).toStrictEqual(streams.map((_, i) => i));
    expect(hub.stats()).toMatchObject({
      openStreams: 0,
      closed: expect.objectContaining({ drained: count, complete: 0 }),
      refusals: expect.objectContaining({ draining: 1 }),
      draining: true,
    });
  });

  test("the package's client, drained off one node, is refused there once (Retry-After) and listens on the next", async () => {
    const a = await serve({ retryAfterSeconds: 1 });
    const b = await serve({});
    // A load balancer that has not taken the draining node out yet: the first listens go to A, the
    // one after a refusal to B.
    const targets: string[] = [];
    const balanced: typeof fetch = (input, init) => {
      const target = targets.length < 2 ? a.url : b.url;
      targets.push(target);
      return fetch(target, init);
    };
    const subscription = await subscribe(
      a.url,
      { toolsListChanged: true },
      {
        headers: { 'x-user': 'alice' },
        reconnect: { initialDelayMs: 10, maxDelayMs: 60_000 },
        fetch: balanced,
      },
    );
    try {
      const drained = a.hub.drain();
      const gap = await subscription[Symbol.asyncIterator]().next();
      // The graceful end, then one refusal (retried after its Retry-After), then B: no error surfaced.
      expect(gap.value).toStrictEqual({
        type: 'gap',
        reason: 'complete',
        honored: { toolsListChanged: true },
        attempts: 2,
      });
      expect(targets).toStrictEqual([a.url, a.url, b.url]);
      expect(subscription.error).toBeUndefined();
      await drained;
      expect(a.hub.stats()).toMatchObject({
        closed: expect.objectContaining({ drained: 1 }),
        refusals: expect.objectContaining({ draining: 1 }),
      });
      expect(b.hub.stats().openStreams).toBe(1);
      b.hub.toolsListChanged();
      await subscription.waitFor(TOOLS);
    } finally {
      await subscription.close();
    }
  });
});
