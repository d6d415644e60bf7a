/**
 * The notes app's MCP server, built with the official SDK the way a host app already serves MCP:
 * notes as a resource template, a couple of tools and a prompt. Everything but
 * `subscriptions/listen` is served from here; listen is served by `mcp-subscriptions` in front of it.
 *
 * Framework-free: `createMcpHandler(factory)` calls the factory once per request, in either sample.
 */
import {
  createMcpHandler,
  inputRequired,
  McpServer,
  ProtocolError,
  type McpHttpHandler,
  ResourceNotFoundError,
  ResourceTemplate,
  type CallToolResult,
} from '@modelcontextprotocol/server';
import { advertiseOffer, type SubscriptionHub } from 'mcp-subscriptions';
import * as z from 'zod';
import { principalOf } from './auth.ts';
import type { NotesService } from './notes-service.ts';
import { offer } from './offer.ts';

/**
 * The app's read check, in the shape the listen handler calls it: may `principal` read `uri`? The
 * MCP server's `resources/read` calls the very function the listen middleware is given.
 */
export type ReadCheck = (uri: string, context: { readonly principal: string }) => boolean | PromiseLike<boolean>;

/** What the MCP server is built from. */
export interface NotesMcpServerOptions {
  readonly notes: NotesService;
  /** The read check `resources/read` enforces; the same function the listen middleware is given. */
  readonly canRead: ReadCheck;
  /** Publishes the list changes the conformance fixture tools trigger. */
  readonly hub: Pick<SubscriptionHub, 'toolsListChanged' | 'promptsListChanged'>;
  /** Also register the MCP conformance suite's fixture tools. */
  readonly conformance: boolean;
  /** The server's identity, in `_meta` of every result. */
  readonly serverInfo: { readonly name: string; readonly version: string };
}

function text(value: string): CallToolResult {
  return { content: [{ type: 'text', text: value }] };
}

/**
 * Builds one MCP server instance (the SDK asks for a fresh one per request).
 *
 * @example
 * ```ts
 * const handler = createMcpHandler(() => createNotesMcpServer({ notes, canRead, hub, conformance, serverInfo }), { bus: hub });
 * ```
 */
export function createNotesMcpServer(options: NotesMcpServerOptions): McpServer {
  const { notes, canRead, hub } = options;
  // discover advertises exactly the offer listen honours, whatever the server registers below.
  const server = advertiseOffer(
    new McpServer({ name: options.serverInfo.name, version: options.serverInfo.version }),
    offer,
  );

  server.registerResource(
    'note',
    new ResourceTemplate('note://{owner}/{name}', {
      // The caller's readable notes: their own and the shared ones.
      list: (ctx) => {
        const principal = principalOf(ctx.http?.authInfo);
        const readable = principal === undefined ? [] : notes.readableBy(principal);
        return {
          resources: readable.map((note) => ({
            uri: note.uri,
            name: `${note.owner}/${note.name}`,
            mimeType: 'text/plain',
          })),
        };
      },
    }),
    { title: 'Note', description: 'A text note: note://<owner>/<name>', mimeType: 'text/plain' },
    async (uri, _variables, ctx) => {
      const principal = principalOf(ctx.http?.authInfo);
      // The check and the lookup use the same string, so what is read is exactly what was checked.
      // An unreadable note answers like a missing one: the error reveals nothing about existence.
      const href = uri.href;
      if (principal === undefined || !(await canRead(href, { principal }))) throw new ResourceNotFoundError(href);
      const note = notes.get(href);
      if (note === undefined) throw new ResourceNotFoundError(href);
      return { contents: [{ uri: note.uri, mimeType: 'text/plain', text: note.text }] };
    },
  );

  server.registerTool(
    'echo',
    {
      title: 'Echo',
      description: 'Returns the text it is given.',
      inputSchema: z.object({ text: z.string().max(10_000) }),
      annotations: { readOnlyHint: true },
    },
    ({ text: value }) => text(value),
  );

  server.registerTool(
    'whoami',
    {
      title: 'Who am I',
      description: 'Returns the principal the server authenticated the caller as.',
      annotations: { readOnlyHint: true },
    },
    (ctx) => text(principalOf(ctx.http?.authInfo) ?? 'anonymous'),
  );

  server.registerPrompt(
    'draft_note',
    {
      title: 'Draft a note',
      description: 'Asks the model to draft a short note on a topic.',
      argsSchema: z.object({ topic: z.string().max(200) }),
    },
    ({ topic }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Draft a short, plain-text note about: ${topic}` } }],
    }),
  );

  if (options.conformance) registerConformanceFixtures(server, hub);
  return server;
}

/**
 * The fixture tools the MCP conformance suite's `server-stateless` scenario calls. Registered only
 * under `MCP_CONFORMANCE=1`.
 */
function registerConformanceFixtures(
  server: McpServer,
  hub: Pick<SubscriptionHub, 'toolsListChanged' | 'promptsListChanged'>,
): void {
  server.registerTool(
    'test_trigger_tool_change',
    { description: 'Publishes notifications/tools/list_changed to open listen streams.' },
    () => {
      hub.toolsListChanged();
      return text('Tool list change published.');
    },
  );
  server.registerTool(
    'test_trigger_prompt_change',
    { description: 'Publishes notifications/prompts/list_changed to open listen streams.' },
    () => {
      hub.promptsListChanged();
      return text('Prompt list change published.');
    },
  );
  // Needs the sampling client capability: the SDK answers -32021 (HTTP 400) when it is not declared.
  server.registerTool(
    'test_missing_capability',
    { description: 'Asks for a sampling round, so it requires the sampling client capability.' },
    (ctx) =>
      ctx.mcpReq.inputResponses?.['sample'] !== undefined
        ? text('Sampling response received.')
        : inputRequired({
            inputRequests: {
              sample: inputRequired.createMessage({
                messages: [{ role: 'user', content: { type: 'text', text: 'Say hello.' } }],
                maxTokens: 16,
              }),
            },
          }),
  );
  // Answers with an input-required result (a confirmation), never with a request on the stream.
  server.registerTool(
    'test_streaming_elicitation',
    { description: 'Needs a confirmation, asked for with an input-required result.' },
    (ctx) =>
      ctx.mcpReq.inputResponses?.['confirm'] !== undefined
        ? text('Confirmation received.')
        : inputRequired({
            inputRequests: {
              confirm: inputRequired.elicit({
                message: 'Continue?',
                requestedSchema: {
                  type: 'object',
                  properties: { confirm: { type: 'boolean' } },
                  required: ['confirm'],
                },
              }),
            },
          }),
  );
  // Logs through the SDK, which puts a log notification on the wire only when the request asked for a level.
  server.registerTool('test_logging_tool', { description: 'Logs one message at level info.' }, async (ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran');
    return text('Logging tool finished.');
  });
}

/** What the SDK handler of either sample is built from. */
export interface NotesMcpHandlerOptions extends Omit<NotesMcpServerOptions, 'hub'> {
  /** The hub: the source of the fixture tools' list changes and the SDK's event bus. */
  readonly hub: SubscriptionHub;
  /** SSE keepalive of the SDK's own streams, or `false`. */
  readonly keepAliveMs: number | false;
}

/**
 * The SDK's handler for everything but listen, as both samples serve it: the hub is the SDK's event
 * bus too (so `notify.*` reaches the listen streams), and 2025-era requests are refused (listChanged
 * and subscribe are honoured on listen streams only, which those clients cannot open).
 */
export function createNotesMcpHandler(options: NotesMcpHandlerOptions): McpHttpHandler {
  const { keepAliveMs, ...server } = options;
  return createMcpHandler(() => createNotesMcpServer(server), {
    bus: options.hub,
    legacy: 'reject',
    keepAliveMs: keepAliveMs === false ? 0 : keepAliveMs,
    onerror: (error) => {
      // A client's mistake (a bad envelope, an unsupported version) is answered with its error; only the
      // server's own failures are worth a log line.
      if (ProtocolError.isInstance(error) || /^(Rejected |Unsupported Media Type)/.test(error.message)) return;
      console.error('[mcp]', error);
    },
  });
}
