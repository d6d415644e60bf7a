/**
 * The rest of MCP: the official SDK's handler behind a controller route on `/mcp`, with the read
 * guard. McpSubscriptionsModule's listen route sits in front of it on the same path and hands it every
 * request that is not `subscriptions/listen`.
 */
import type { ServerResponse } from 'node:http';
import { All, Controller, Inject, Req, Res, UseGuards, type BeforeApplicationShutdown } from '@nestjs/common';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import type { AuthedRequest } from './auth.guard';
import { createMcpServer } from './mcp-server';
import { NoteReadGuard } from './note-read.guard';
import { NotesService } from './notes.service';

@Controller('mcp')
@UseGuards(NoteReadGuard)
export class McpController implements BeforeApplicationShutdown {
  private readonly mcp: McpHttpHandler;
  private readonly mcpNode: ReturnType<typeof toNodeHandler>;

  constructor(@Inject(SubscriptionHub) hub: SubscriptionHub, @Inject(NotesService) notes: NotesService) {
    // With the hub as its bus, the SDK handler's notify.* reaches listen streams too.
    this.mcp = createMcpHandler(() => createMcpServer(notes), { bus: hub });
    this.mcpNode = toNodeHandler(this.mcp);
  }

  @All()
  serve(@Req() req: AuthedRequest, @Res() res: ServerResponse): Promise<void> {
    return this.mcpNode(req, res, req.body);
  }

  /** Closes the SDK's handler on shutdown (the module ends every listen stream at the same stage). */
  async beforeApplicationShutdown(): Promise<void> {
    await this.mcp.close();
  }
}
