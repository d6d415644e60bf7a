import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import express, { type Express } from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { bearerAuth } from './auth.ts';
import { createMcpServer, offer } from './mcp-server.ts';
import { canRead, NOTE_NAME, NotesService, principalOf } from './notes.ts';

export function createApp(): { app: Express; close: () => Promise<void> } {
  const hub = new SubscriptionHub(); // one per process: services publish to it, listen streams read it
  const notes = new NotesService(hub);
  // The SDK's handler serves the rest of MCP. With the hub as its bus it can never serve a listen past
  // the read check (docs/mount-order.md), and its notify.* reaches listen streams too.
  const mcp = createMcpHandler(() => createMcpServer(notes), { bus: hub });
  const mcpNode = toNodeHandler(mcp);

  const app = express();
  app.all(
    '/mcp',
    bearerAuth, // 1. sets req.auth: who the caller is
    mcpSubscriptions({ hub, capabilities: offer, canRead }), // 2. serves listen, passes everything else on
    (req, res, next) => mcpNode(req, res, req.body).catch(next), // 3. the rest of MCP (req.body read by 2.)
  );

  // A REST route that changes a note: the note's listeners get notifications/resources/updated.
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
