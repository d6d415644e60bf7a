import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import Fastify, { type FastifyInstance } from 'fastify';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/fastify';
import { bearerAuth } from './auth.ts';
import { createMcpServer, offer } from './mcp-server.ts';
import { canRead, NOTE_NAME, NotesService, principalOf } from './notes.ts';

export async function buildApp(): Promise<FastifyInstance> {
  // The plugin logs failed checks and mount-order mistakes through the app's logger.
  const app = Fastify({ logger: { level: 'warn' } });
  const hub = new SubscriptionHub(); // one per process: services publish to it, listen streams read it
  const notes = new NotesService(hub);
  // The SDK's handler serves the rest of MCP. With the hub as its bus it can never serve a listen past
  // the read check (docs/mount-order.md), and its notify.* reaches listen streams too.
  const mcp = createMcpHandler(() => createMcpServer(notes), { bus: hub });
  const mcpNode = toNodeHandler(mcp);
  app.decorateRequest('auth', undefined);

  // 1. The plugin first: it puts listen in front of the handler of the MCP route registered after it.
  await app.register(mcpSubscriptions, { hub, capabilities: offer, canRead });

  // 2. The MCP route: its auth hook runs first (sets request.auth: who the caller is), then listen, then
  //    for everything else the SDK's handler, which writes Node's response itself.
  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    onRequest: bearerAuth,
    handler: (request, reply) => {
      reply.hijack();
      // The SDK reads the caller from Node's request: hand it the auth your hook set.
      return mcpNode(Object.assign(request.raw, { auth: request.auth }), reply.raw, request.body);
    },
  });

  // A REST route that changes a note: the note's listeners get notifications/resources/updated.
  app.put<{ Params: { name: string }; Body: { text?: unknown } | undefined }>(
    '/notes/:name',
    { onRequest: bearerAuth },
    async (request, reply) => {
      const owner = principalOf(request.auth);
      const { name } = request.params;
      const text = request.body?.text;
      if (owner === undefined || !NOTE_NAME.test(name) || typeof text !== 'string') {
        return reply.code(400).send({ error: 'expected PUT /notes/<name> with {"text": "..."}' });
      }
      return { uri: notes.save(owner, name, text) };
    },
  );

  // On app.close(): the plugin ends every listen stream with its terminal result, the server closes,
  // then the hub and the SDK's handler.
  app.addHook('onClose', async () => {
    await hub.close();
    await mcp.close();
  });
  return app;
}
