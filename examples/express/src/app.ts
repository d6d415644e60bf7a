/**
 * The Express app: the app's own bearer auth, the SDK's MCP handler for everything but listen,
 * mcp-subscriptions in front of it for listen, and a REST route whose changes reach listen streams.
 */
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import express, { type Express } from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { bearerAuth, principalOf } from './auth.ts';
import { createMcpServer, offer } from './mcp-server.ts';
import { canRead, NOTE_NAME, NotesService } from './notes.ts';

export function createApp(): { app: Express; close: () => Promise<void> } {
  // One hub per process: services publish to it, and every listen stream is served from it.
  const hub = new SubscriptionHub();
  const notes = new NotesService(hub);

  // The SDK's handler serves everything but listen. With the hub as its bus, the handler's notify.*
  // reaches listen streams too.
  const mcp = createMcpHandler(() => createMcpServer(notes), { bus: hub });
  const mcpNode = toNodeHandler(mcp);

  const app = express();
  app.all(
    '/mcp',
    bearerAuth, // sets req.auth: who the caller is
    mcpSubscriptions({ hub, capabilities: offer, canRead }), // serves listen, passes everything else on
    (req, res, next) => {
      // The listen middleware has read the JSON body and left it on req.body.
      mcpNode(req, res, req.body).catch(next);
    },
  );

  // A REST route that changes a note: the note's listen subscribers get notifications/resources/updated.
  app.put('/notes/:name', bearerAuth, express.json(), (req, res) => {
    const owner = principalOf(req.auth);
    const { name } = req.params;
    const text: unknown = req.body?.text;
    if (owner === undefined || typeof name !== 'string' || !NOTE_NAME.test(name) || typeof text !== 'string') {
      res.status(400).json({ error: 'expected PUT /notes/<name> with {"text": "..."}' });
      return;
    }
    res.json({ uri: notes.save(owner, name, text) });
  });

  // On shutdown: every listen stream ends with its terminal result, then the SDK's handler closes.
  const close = async (): Promise<void> => {
    await hub.close();
    await mcp.close();
  };
  return { app, close };
}
