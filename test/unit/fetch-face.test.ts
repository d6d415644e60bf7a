/**
 * The web-standard fetch face without sockets: a `Request` in, a `Response` out, its body read (or not)
 * by the test as a runtime's server would. Backpressure is the reader's pace: a reader that stops pulling
 * makes the stream coalesce in the hub's queue, and the stall timeout closes it; a reader that resumes
 * gets the latest of everything. The request's signal is the client leaving.
 */
import { afterEach, describe, expect, test } from '@jest/globals';
import { SubscriptionHub } from 'mcp-subscriptions';
import { createFetchListen, type FetchListenOptions } from 'mcp-subscriptions/fetch';
import { thrown } from '../helpers/assert.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { listenBody, listenHeaders, SseParser, type SseEvent } from '../helpers/sse.ts';

const hubs: SubscriptionHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((hub) => hub.close()));
});

function setUp(
  hubOptions: ConstructorParameters<typeof SubscriptionHub>[0] = {},
  options: Partial<FetchListenOptions> = {},
) {
  const hub = new SubscriptionHub({ logger: recordingLogger(), ...hubOptions });
  hubs.push(hub);
  const listen = createFetchListen({
    hub,
    capabilities: { toolsListChanged: true, resourceSubscriptions: true },
    keepAliveMs: false,
    canRead: (uri, { principal }) => uri.startsWith(`note://${principal}/`),
    principal: (request) => request.headers.get('x-user') ?? undefined,
    ...options,
  });
  return { hub, listen };
}

function listenRequest(body: unknown, init: { signal?: AbortSignal; headers?: Record<string, string> } = {}): Request {
  return new Request('http://localhost/mcp', {
    method: 'POST',
    headers: { ...listenHeaders(), 'x-user': 'alice', ...init.headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(init.signal !== undefined ? { signal: init.signal } : {}),
  });
}

/** Reads a response body as a runtime would, only when told to: `pull()` reads one chunk. */
function reader(response: Response) {
  const stream = response.body!.getReader();
  const events: SseEvent[] = [];
  const parser = new SseParser((event) => events.push(event));
  let ended = false;
  let failed: unknown;
  return {
    events,
    get ended() {
      return ended;
    },
    get failed() {
      return failed;
    },
    async pull(): Promise<boolean> {
      try {
        const { done, value } = await stream.read();
        if (done) ended = true;
        else parser.feed(value);
        return !done;
      } catch (error) {
        failed = error;
        return false;
      }
    },
    async readToEnd(): Promise<void> {
      while (await this.pull());
    },
  };
}

describe('fetch face: a listen in, an SSE Response out', () => {
  test('acknowledges the honoured filter, delivers, and ends with the terminal result on hub.complete()', async () => {
    const { hub, listen } = setUp();
    const response = await listen(
      listenRequest(
        listenBody(1, { toolsListChanged: true, resourceSubscriptions: ['note://alice/a', 'note://bob/b'] }),
      ),
    );
    expect(response?.status).toBe(200);
    expect(response?.headers.get('content-type')).toBe('text/event-stream');
    // Hop-by-hop headers are the runtime server's.
    expect(response?.headers.get('connection')).toBeNull();
    const body = reader(response!);
    await body.pull();
    expect(body.events[0]?.json.method).toBe('notifications/subscriptions/acknowledged');
    expect(body.events[0]?.json.params.notifications).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/a'],
    });
    hub.toolsListChanged();
    hub.resourceUpdated('note://alice/a');
    await body.pull();
    // complete() resolves once the client has read the end: read meanwhile, as a client does.
    const completing = hub.complete();
    await body.readToEnd();
    await completing;
    expect(body.events.map((event) => event.json.method ?? event.json.result?.resultType)).toStrictEqual([
      'notifications/subscriptions/acknowledged',
      'notifications/tools/list_changed',
      'notifications/resources/updated',
      'complete',
    ]);
    expect(hub.stats().closed.complete).toBe(1);
  });

  test('a reader that stops pulling makes the hub coalesce; once it pulls again it gets the latest, nothing lost unseen', async () => {
    const { hub, listen } = setUp({ stallTimeoutMs: false });
    const uris = ['note://alice/a', 'note://alice/b'];
    const response = await listen(
      listenRequest(listenBody('bp', { toolsListChanged: true, resourceSubscriptions: uris })),
    );
    const body = reader(response!);
    await body.pull(); // the ack
    // Far more than the body's queue holds (16 KiB), each in a tick of its own, while nobody reads.
    for (let i = 0; i < 400; i++) {
      hub.resourceUpdated(uris[i % 2]!);
      hub.toolsListChanged();
      await Promise.resolve();
    }
    await waitFor(() => hub.stats().coalesced > 0, 'coalescing');
    const stats = hub.stats();
    expect(stats.queued).toBeGreaterThan(0);
    expect(stats.queued).toBeLessThanOrEqual(3); // one entry per key the filter follows
    expect(stats.dropped).toBe(0);
    const completing = hub.complete();
    await body.readToEnd();
    await completing;
    expect(body.failed).toBeUndefined();
    const methods = body.events.map((event) => event.json.method ?? event.json.result?.resultType);
    expect(methods.at(-1)).toBe('complete');
    // Everything written plus the coalesced updates account for every delivery.
    const delivered = methods.filter(
      (method) => method !== 'complete' && method !== 'notifications/subscriptions/acknowledged',
    );
    expect(delivered.length + hub.stats().coalesced).toBe(800);
    // The latest of each key arrived after the reader resumed.
    const tail = body.events.slice(-4, -1).map((event) => event.json.params?.uri ?? event.json.method);
    expect(new Set(tail)).toStrictEqual(new Set([...uris, 'notifications/tools/list_changed']));
  });

  test('a reader that stops pulling for stallTimeoutMs is closed as stalled, its body errored', async () => {
    const { hub, listen } = setUp({ stallTimeoutMs: 50 });
    const response = await listen(listenRequest(listenBody('st', { toolsListChanged: true })));
    const body = reader(response!);
    await body.pull();
    for (let i = 0; i < 2000 && hub.stats().queued === 0; i++) {
      hub.toolsListChanged();
      await Promise.resolve();
    }
    expect(hub.stats().queued).toBe(1);
    await waitFor(() => hub.stats().closed.stalled === 1, 'the stall timeout');
    expect(hub.stats().openStreams).toBe(0);
    await body.readToEnd();
    expect(String(body.failed)).toMatch(/aborted/);
  });

  test("the request's signal is the client leaving: the stream closes as 'client', its slot freed", async () => {
    const { hub, listen } = setUp();
    const abort = new AbortController();
    const response = await listen(
      listenRequest(listenBody('ab', { toolsListChanged: true }), { signal: abort.signal }),
    );
    const body = reader(response!);
    await body.pull();
    expect(hub.stats().openStreams).toBe(1);
    abort.abort();
    await waitFor(() => hub.stats().closed.client === 1, 'the close');
    expect(hub.stats().openStreams).toBe(0);
  });

  test('a runtime that cancels the body (its client went) closes the stream as client', async () => {
    const { hub, listen } = setUp();
    const response = await listen(listenRequest(listenBody('cn', { toolsListChanged: true })));
    await response!.body!.cancel();
    await waitFor(() => hub.stats().closed.client === 1, 'the close');
  });
});

describe('fetch face: what is not a listen goes on, its body unread', () => {
  test('another MCP request resolves undefined and its body is still readable', async () => {
    const { listen } = setUp();
    const other = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} };
    const request = listenRequest(other, { headers: { 'mcp-method': 'tools/list' } });
    expect(await listen(request)).toBeUndefined();
    expect(await request.json()).toStrictEqual(other);
  });

  test('a GET, and a body that is not JSON, are passed on unread', async () => {
    const { listen } = setUp();
    expect(await listen(new Request('http://localhost/mcp'))).toBeUndefined();
    const text = new Request('http://localhost/mcp', {
      method: 'POST',
      body: 'hello',
      headers: { 'content-type': 'text/plain' },
    });
    expect(await listen(text)).toBeUndefined();
    expect(await text.text()).toBe('hello');
  });

  test('malformed JSON without Mcp-Method goes on for the MCP server to refuse; with it, it is -32700 here', async () => {
    const { listen } = setUp();
    const request = listenRequest('{"jsonrpc":', { headers: { 'mcp-method': 'tools/list' } });
    expect(await listen(request)).toBeUndefined();
    expect(await request.text()).toBe('{"jsonrpc":');
    const ours = await listen(listenRequest('{"jsonrpc":'));
    expect(ours?.status).toBe(400);
    expect(((await ours!.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });
});

describe('fetch face: options', () => {
  test('mistakes throw at construction, naming the field', () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    hubs.push(hub);
    const base = { hub, capabilities: { toolsListChanged: true } };
    expect(thrown(() => createFetchListen(base as never))).toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_MISSING_OPTION',
      message: expect.stringMatching(/`principal`/),
    });
    expect(thrown(() => createFetchListen({ ...base, principal: 'alice' } as never))).toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_NOT_FUNCTION',
    });
    expect(thrown(() => createFetchListen({ ...base, principal: () => 'a', maxBodyBytes: -5 }))).toMatchObject({
      message: expect.stringMatching(/`maxBodyBytes`/),
    });
    expect(thrown(() => createFetchListen({ ...base, principal: () => 'a', principle: 1 } as never)).message).toMatch(
      /principal/,
    );
  });
});
