/**
 * The app's MCP server, built with the official SDK v2: notes as resources, a tool and a prompt. It
 * serves everything but `subscriptions/listen`, which McpSubscriptionsModule serves in front of it.
 */
import { McpServer, ResourceNotFoundError, ResourceTemplate } from '@modelcontextprotocol/server';
import { advertiseOffer } from 'mcp-subscriptions';
import { principalOf } from './auth.guard';
import { canRead, type NotesService } from './notes.service';

// Declared once: listen honours exactly this, and server/discover advertises exactly this.
export const offer = {
  toolsListChanged: true,
  promptsListChanged: true,
  resourcesListChanged: true,
  resourceSubscriptions: true,
};

/** One MCP server instance (the SDK's handler asks for one per request). */
export function createMcpServer(notes: NotesService): McpServer {
  // discover advertises exactly the offer, whatever is registered below (the SDK would turn on
  // listChanged for every kind it registers).
  const server = advertiseOffer(new McpServer({ name: 'notes', version: '1.0.0' }), offer);

  const list = new ResourceTemplate('note://{owner}/{name}', {
    list: (ctx) => {
      const principal = principalOf(ctx.http?.authInfo);
      const uris = principal === undefined ? [] : notes.urisOf(principal);
      return { resources: uris.map((uri) => ({ uri, name: uri, mimeType: 'text/plain' })) };
    },
  });
  server.registerResource('note', list, { mimeType: 'text/plain' }, (uri, _variables, ctx) => {
    // The same read rule as the guard's: a note you may not read looks exactly like a missing one.
    const principal = principalOf(ctx.http?.authInfo);
    const text = principal !== undefined && canRead(uri.href, principal) ? notes.read(uri.href) : undefined;
    if (text === undefined) throw new ResourceNotFoundError(uri.href);
    return { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] };
  });

  server.registerTool('whoami', { description: 'Who the server authenticated you as.' }, (ctx) => ({
    content: [{ type: 'text', text: principalOf(ctx.http?.authInfo) ?? 'anonymous' }],
  }));

  server.registerPrompt('summarize_notes', { description: 'Asks the model to summarize your notes.' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'Summarize my notes in three bullet points.' } }],
  }));
  return server;
}
