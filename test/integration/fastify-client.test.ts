/**
 * Interop on Fastify: the official `@modelcontextprotocol/client` listens through a Fastify app whose
 * MCP route hands everything else to the official SDK's handler (`createMcpHandler` with the hub as its
 * bus, through `toNodeHandler` on Fastify's hijacked reply), with the plugin in front of that route.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import Fastify, { type FastifyInstance } from 'fastify';
import { SubscriptionHub, toServerCapabilities } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/fastify';
import { bearer } from '../helpers/bearer.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { bearerAuth, listenFastify, type AuthedRequest } from '../helpers/fastify-apps.ts';

const OFFER = { toolsListChanged: true, resourceSubscriptions: true } as const;

describe('Fastify: the official client listens; the SDK serves the rest of MCP', () => {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  const mcp = createMcpHandler(
    () => new McpServer({ name: 'fastify-host', version: '1.0.0' }, { capabilities: toServerCapabilities(OFFER) }),
    { bus: hub, legacy: 'reject' },
  );
  const node = toNodeHandler(mcp);
  let app: FastifyInstance;
  let url: string;
  /** The MCP methods the SDK's handler served. */
  const sdkServed: unknown[] = [];

  beforeAll(async () => {
    app = Fastify();
    await app.register(mcpSubscriptions, {
      hub,
      capabilities: OFFER,
      canRead: (uri, { principal }) => uri.startsWith(`note://${principal}/`),
    });
    app.post('/mcp', { onRequest: bearerAuth }, (request, reply) => {
      sdkServed.push(request.headers['mcp-method']);
      // The SDK reads the caller from the Node request's `auth`, as its Express middleware leaves it.
      Object.assign(request.raw, { auth: (request as AuthedRequest).auth });
      reply.hijack();
      return node(request.raw, reply.raw, request.body);
    });
    url = await listenFastify(app);
  });
  afterAll(async () => {
    await app.close();
    await mcp.close();
    await hub.close();
  });

  async function connect(user: string): Promise<Client> {
    const client = new Client(
      { name: 'fastify-interop', version: '0.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: bearer(user) } }));
    return client;
  }

  test('listen() gets the honoured filter and the events; tools/list reaches the SDK; app.close() ends it as graceful', async () => {
    const client = await connect('alice');
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
      // listen never reached the SDK's handler; the rest of MCP does.
      expect(sdkServed).not.toContain('subscriptions/listen');
      const served = sdkServed.length;
      const tools = await client.listTools();
      expect(tools.tools).toStrictEqual([]);
      expect(sdkServed.length).toBeGreaterThan(served);

      hub.resourceUpdated('note://bob/secret');
      hub.toolsListChanged();
      hub.resourceUpdated('note://alice/todo');
      await waitFor(() => seen.length === 2, 'both events');
      expect(seen).toStrictEqual([
        'notifications/tools/list_changed',
        'notifications/resources/updated note://alice/todo',
      ]);

      await app.close();
      expect(await subscription.closed).toBe('graceful');
    } finally {
      await client.close();
    }
  });
});
