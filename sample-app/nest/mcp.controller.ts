/**
 * The rest of MCP, served the way a Nest host app already serves it: the official SDK's handler
 * (`createMcpHandler` + `toNodeHandler`) behind a controller route, with the app's guards. The listen
 * route of `mcp-subscriptions` sits in front of this one on the same path and hands it every request
 * that is not `subscriptions/listen`. On Nest's Fastify platform the SDK is handed Node's request and
 * response under Fastify's, and Fastify is told to leave the response to it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import {
  All,
  Controller,
  Inject,
  Injectable,
  Req,
  Res,
  UseGuards,
  type BeforeApplicationShutdown,
} from '@nestjs/common';
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { McpHttpHandler } from '@modelcontextprotocol/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import type { SampleConfig } from '../shared/config.ts';
import { createNotesMcpHandler, type ReadCheck } from '../shared/mcp-server.ts';
import { canRead, NotesService } from '../shared/notes-service.ts';
import type { AuthedRequest } from './bearer-auth.guard.ts';
import { MCP_PATH, SAMPLE_CONFIG, SERVER_INFO } from './config.ts';
import { NoteReadGuard } from './note-read.guard.ts';

/** What the SDK's Node face reads of a request. */
type SdkRequest = Parameters<ReturnType<typeof toNodeHandler>>[0];

/** The SDK's MCP handler, built once, with its Node face. */
@Injectable()
export class McpHandler implements BeforeApplicationShutdown {
  readonly http: McpHttpHandler;
  readonly node: ReturnType<typeof toNodeHandler>;

  constructor(
    @Inject(SubscriptionHub) hub: SubscriptionHub,
    @Inject(NotesService) notes: NotesService,
    @Inject(SAMPLE_CONFIG) config: SampleConfig,
  ) {
    // The SDK's resources/read enforces the same rule the guard does (the one function both call), so a
    // read that reaches the SDK without passing the guard still cannot hand out a foreign note.
    const readCheck: ReadCheck = (uri, { principal }) => canRead(principal, uri);
    this.http = createNotesMcpHandler({
      notes,
      canRead: readCheck,
      hub,
      conformance: config.conformance,
      serverInfo: SERVER_INFO,
      keepAliveMs: config.keepAliveMs,
    });
    this.node = toNodeHandler(this.http);
  }

  /** Aborts the SDK's own in-flight responses before the HTTP server closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.http.close();
  }
}

/**
 * `/mcp`, every method: the SDK answers what is not listen (and 405 to GET and DELETE). The global
 * bearer guard and {@link NoteReadGuard} run first; the latter is THE read check of `resources/read`.
 */
@Controller(MCP_PATH)
@UseGuards(NoteReadGuard)
export class McpController {
  constructor(@Inject(McpHandler) private readonly mcp: McpHandler) {}

  @All()
  serve(@Req() req: AuthedRequest, @Res() res: ServerResponse | FastifyReply): Promise<void> {
    if ('hijack' in res) {
      // Fastify must not answer after this handler: the SDK writes Node's response itself.
      res.hijack();
      return this.mcp.node(
        sdkRequestOf(req as FastifyRequest & Pick<AuthedRequest, 'auth'>),
        res.raw,
        jsonOf(req.body),
      );
    }
    // The listen route read the body when no parser had (and left it here); undefined lets the SDK read it.
    return this.mcp.node(req as AuthedRequest & IncomingMessage, res, req.body);
  }
}

/**
 * The SDK's view of a request on Fastify: Node's request with the caller's `auth`. Its body is what
 * Fastify parsed; text that is not JSON (see fastify-json-body.ts) is handed over as the body's bytes,
 * for the SDK to answer with its own parse error, exactly as when it reads them itself.
 */
function sdkRequestOf(req: FastifyRequest & Pick<AuthedRequest, 'auth'>): SdkRequest {
  const { raw, body } = req;
  return {
    method: raw.method,
    url: raw.url,
    headers: raw.headers,
    ...(req.auth !== undefined ? { auth: req.auth } : {}),
    [Symbol.asyncIterator]: () => (typeof body === 'string' ? Readable.from([body]) : raw)[Symbol.asyncIterator](),
  };
}

/** A body Fastify parsed as JSON; `undefined` for the text the MCP route keeps as sent (the SDK reads it then). */
function jsonOf(body: unknown): unknown {
  return typeof body === 'string' ? undefined : body;
}
