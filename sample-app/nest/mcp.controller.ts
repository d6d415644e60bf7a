/**
 * The rest of MCP, served the way a Nest host app already serves it: the official SDK's handler
 * (`createMcpHandler` + `toNodeHandler`) behind a controller route, with the app's guards. The listen
 * route of `mcp-subscriptions` sits in front of this one on the same path and hands it every request
 * that is not `subscriptions/listen`.
 */
import type { ServerResponse } from 'node:http';
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
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import type { SampleConfig } from '../shared/config.ts';
import { createNotesMcpHandler, type ReadCheck } from '../shared/mcp-server.ts';
import { canRead, NotesService } from '../shared/notes-service.ts';
import type { AuthedRequest } from './bearer-auth.guard.ts';
import { MCP_PATH, SAMPLE_CONFIG, SERVER_INFO } from './config.ts';
import { NoteReadGuard } from './note-read.guard.ts';

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
  serve(@Req() req: AuthedRequest, @Res() res: ServerResponse): Promise<void> {
    // The listen route read the body when no parser had (and left it here); undefined lets the SDK read it.
    return this.mcp.node(req, res, req.body);
  }
}
