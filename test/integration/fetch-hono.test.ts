/**
 * The web-standard fetch face and the Hono middleware over real HTTP on loopback, both served by
 * `@hono/node-server`: the official `@modelcontextprotocol/client` listens while the SDK's own handler
 * (its `fetch` face) serves the rest of MCP; bad input gets the errors the Express middleware gives;
 * what is not a listen goes on with its body intact; the client hanging up closes its stream.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { serve } from '@hono/node-server';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createMcpHandler, McpServer, type AuthInfo } from '@modelcontextprotocol/server';
import { Hono, type MiddlewareHandler } from 'hono';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SubscriptionHub, toServerCapabilities } from 'mcp-subscriptions';
import { createFetchListen } from 'mcp-subscriptions/fetch';
import { mcpSubscriptions } from 'mcp-subscriptions/hono';
import { bearer } from '../helpers/bearer.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { cancelBody, listen, listenBody, listenHeaders, post } from '../helpers/sse.ts';

const OFFER = { toolsListChanged: true, resourceSubscriptions: true } as const;

interface Env {
  Variables: { auth: AuthInfo; parsedBody: unknown };
}

/** The host's auth: `Authorization: Bearer <user>` is `<user>`; none is the host's 401. */
const auth: MiddlewareHandler<Env> = async (c, next) => {
  const match = /^Bearer (.+)$/.exec(c.req.header('authorization') ?? '');
  if (match === null) return c.json({ error: 'unauthorized' }, 401);
  c.set('auth', { token: match[1]!, clientId: 'c', scopes: [], extra: { sub: match[1]! } });
  await next();
  return undefined;
};

function serveOn(fetch: (request: Request) => Response | Promise<Response>): Promise<{ url: string; server: Server }> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) =>
      resolve({ url: `http://127.0.0.1:${info.port}/mcp`, server }),
    ) as Server;
  });
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** The SDK's handler for the rest of MCP, with `hub` as its bus; `served` collects the methods it saw. */
function sdkHandler(hub: SubscriptionHub, name: string) {
  return createMcpHandler(
    () => new McpServer({ name, version: '1.0.0' }, { capabilities: toServerCapabilities(OFFER) }),
    {
      bus: hub,
      legacy: 'reject',
    },
  );
}

async function connect(url: string, user: string): Promise<Client> {
  const client = new Client(
    { name: 'fetch-interop', version: '0.0.0' },
    { versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: bearer(user) } }));
  return client;
}

/** Listens with the official client, checks the honoured filter and the events, then ends it with hub.complete(). */
async function officialClientRoundTrip(url: string, hub: SubscriptionHub, sdkServed: unknown[]): Promise<void> {
  const client = await connect(url, 'alice');
  try {
    const seen: string[] = [];
    client.setNotificationHandler('notifications/tools/list_changed', (n) => void seen.push(n.method));
    client.setNotificationHandler(
      'notifications/resources/updated',
      (n) => void seen.push(`${n.method} ${n.params.uri}`),
    );
    const subscription = await client.listen({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/todo', 'note://bob/secret'],
    });
    expect(subscription.honoredFilter).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/todo'],
    });
    expect(sdkServed).not.toContain('subscriptions/listen');
    const served = sdkServed.length;
    expect((await client.listTools()).tools).toStrictEqual([]);
    expect(sdkServed.length).toBeGreaterThan(served);

    hub.resourceUpdated('note://bob/secret');
    hub.toolsListChanged();
    hub.resourceUpdated('note://alice/todo');
    await waitFor(() => seen.length === 2, 'both events');
    expect(seen).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/resources/updated note://alice/todo',
    ]);
    await hub.complete();
    expect(await subscription.closed).toBe('graceful');
  } finally {
    await client.close();
  }
}

describe('Hono: the middleware in front of the SDK, on @hono/node-server', () => {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  const mcp = sdkHandler(hub, 'hono-host');
  const sdkServed: unknown[] = [];
  /** What the handler after the middleware saw of each request it was passed. */
  const passed: { parsedBody: unknown; raw: string }[] = [];
  const checkedWith: unknown[] = [];
  let url = '';
  let server: Server;

  beforeAll(async () => {
    const app = new Hono<Env>();
    app.post(
      '/mcp',
      auth,
      mcpSubscriptions<Env>({
        hub,
        capabilities: OFFER,
        keepAliveMs: false,
        maxBodyBytes: 64 * 1024,
        canRead: (uri, { principal, request }) => {
          checkedWith.push(request.get('auth').extra?.['sub']);
          return uri.startsWith(`note://${principal}/`);
        },
      }),
      async (c) => {
        if (c.req.header('x-echo') !== undefined) {
          passed.push({ parsedBody: c.get('parsedBody'), raw: await c.req.text() });
          return c.json({ passed: true });
        }
        sdkServed.push(c.req.header('mcp-method'));
        return mcp.fetch(c.req.raw, { authInfo: c.get('auth'), parsedBody: c.get('parsedBody') });
      },
    );
    ({ url, server } = await serveOn(app.fetch));
  });
  afterAll(async () => {
    await closeServer(server);
    await mcp.close();
    await hub.close();
  });

  test('the official client listens (honoured filter, events, graceful end); tools/list reaches the SDK', async () => {
    await officialClientRoundTrip(url, hub, sdkServed);
    // The read check was handed Hono's context, as set by the app's auth.
    expect(checkedWith).toContain('alice');
  });

  test('bad input gets the errors Express gives: code, HTTP status and the request id', async () => {
    const headers = listenHeaders(bearer('alice'));
    const noMeta = listenBody('m', {}) as { params: { _meta?: unknown } };
    delete noMeta.params._meta;
    const rows: [unknown, Record<string, string>, number, number, unknown][] = [
      ['{"jsonrpc": "2.0", "id": 1,', headers, -32700, 400, null],
      ['[]', headers, -32600, 400, null],
      [noMeta, headers, -32602, 400, 'm'],
      [listenBody('h', {}), { ...headers, 'mcp-protocol-version': '2025-11-25' }, -32020, 400, 'h'],
      [listenBody(5, { toolsListChanged: 1 }), headers, -32602, 400, 5],
      [listenBody(6, { resourceSubscriptions: ['relative/uri'] }), headers, -32602, 400, 6],
      [listenBody(7, {}), { ...headers, 'content-type': 'text/plain' }, -32700, 415, 7],
      [listenBody(8, {}), { ...headers, accept: 'application/json' }, -32700, 406, 8],
    ];
    for (const [body, rowHeaders, code, status, id] of rows) {
      const res = await post(url, body, rowHeaders);
      await res.end();
      const json = JSON.parse(res.text);
      const row = JSON.stringify(body).slice(0, 40); // names the row when the expectation fails
      expect({ row, status: res.status, id: json.id }).toStrictEqual({ row, status, id });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      if (status < 406) expect({ row, code: json.error.code }).toStrictEqual({ row, code });
    }
  });

  test('a body over maxBodyBytes is 413 naming the limit, declared or chunked', async () => {
    const big = JSON.stringify(listenBody('big', { resourceSubscriptions: [`note://alice/${'x'.repeat(70 * 1024)}`] }));
    const declared = await post(
      url,
      big,
      listenHeaders({ ...bearer('alice'), 'content-length': String(Buffer.byteLength(big)) }),
    );
    await declared.end();
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.text).error.message).toMatch(/65536 bytes/);
    const chunked = await post(url, big, listenHeaders({ ...bearer('alice'), 'transfer-encoding': 'chunked' }));
    await chunked.end();
    expect(chunked.status).toBe(413);
  });

  test('what is not a listen goes on: its parsed body at parsedBody, its own body still unread', async () => {
    const other = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
    const res = await post(url, other, {
      ...listenHeaders(bearer('alice')),
      'mcp-method': 'tools/list',
      'x-echo': '1',
    });
    await res.end();
    expect(JSON.parse(res.text)).toStrictEqual({ passed: true });
    expect(passed.at(-1)).toStrictEqual({ parsedBody: other, raw: JSON.stringify(other) });
  });

  test('a client that hangs up closes its stream as client; a cancellation naming it ends it with 202', async () => {
    const before = hub.stats().closed;
    const first = await listen(url, 'gone', { toolsListChanged: true }, bearer('bob'));
    await first.event(1);
    first.close();
    await waitFor(() => hub.stats().closed.client === before.client + 1, 'the hang-up');

    const second = await listen(url, 'cancel-me', { toolsListChanged: true }, bearer('bob'));
    await second.event(1);
    const cancel = await post(url, cancelBody('cancel-me'), {
      ...listenHeaders(bearer('bob')),
      'mcp-method': 'notifications/cancelled',
    });
    await cancel.end();
    expect(cancel.status).toBe(202);
    await second.end();
    expect(hub.stats().closed.cancelled).toBe(before.cancelled + 1);
  });
});

describe('the bare fetch handler, on @hono/node-server', () => {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  const mcp = sdkHandler(hub, 'fetch-host');
  const sdkServed: unknown[] = [];
  let url = '';
  let server: Server;

  beforeAll(async () => {
    const subjectOf = (request: Request): string | undefined =>
      /^Bearer (.+)$/.exec(request.headers.get('authorization') ?? '')?.[1];
    const listenFetch = createFetchListen({
      hub,
      capabilities: OFFER,
      keepAliveMs: false,
      principal: subjectOf,
      canRead: (uri, { principal }) => uri.startsWith(`note://${principal}/`),
    });
    ({ url, server } = await serveOn(async (request) => {
      const response = await listenFetch(request);
      if (response !== undefined) return response;
      sdkServed.push(request.headers.get('mcp-method'));
      const sub = subjectOf(request);
      const authInfo = sub === undefined ? undefined : { token: sub, clientId: 'c', scopes: [], extra: { sub } };
      return mcp.fetch(request, authInfo === undefined ? {} : { authInfo });
    }));
  });
  afterAll(async () => {
    await closeServer(server);
    await mcp.close();
    await hub.close();
  });

  test('the official client listens (honoured filter, events, graceful end); tools/list reaches the SDK', async () => {
    await officialClientRoundTrip(url, hub, sdkServed);
  });

  test('a client that hangs up closes its stream as client', async () => {
    const stream = await listen(url, 'gone', { toolsListChanged: true }, bearer('carol'));
    await stream.event(1);
    stream.close();
    await waitFor(() => hub.stats().closed.client === 1, 'the hang-up');
    expect(hub.stats().openStreams).toBe(0);
  });
});
