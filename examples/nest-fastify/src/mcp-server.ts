import { McpServer, ResourceNotFoundError, ResourceTemplate } from '@modelcontextprotocol/server';
import { advertiseOffer } from 'mcp-subscriptions';
import { principalOf, type NotesService } from './notes.ts';

// Declared once: listen honours exactly this, and server/discover advertises exactly this.
export const offer = { resourceSubscriptions: true };

/** One MCP server instance (the SDK's handler asks for one per request): notes as resources. */
export function createMcpServer(notes: NotesService): McpServer {
  const server = advertiseOffer(new McpServer({ name: 'notes', version: '1.0.0' }), offer);
  const note = new ResourceTemplate('note://{owner}/{name}', { list: undefined });
  server.registerResource('note', note, { mimeType: 'text/plain' }, (uri, _variables, ctx) => {
    // The same read rule as listen's: a note you may not read looks exactly like a missing one.
    const text = notes.read(uri.href, principalOf(ctx.http?.authInfo));
    if (text === undefined) throw new ResourceNotFoundError(uri.href);
    return { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] };
  });
  return server;
}
