import type { IncomingMessage, ServerResponse } from 'node:http';
import { All, Controller, Inject, Req, Res, type BeforeApplicationShutdown } from '@nestjs/common';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import type { AuthedRequest } from './auth.guard.ts';
import { createMcpServer } from './mcp-server.ts';
import { NotesService } from './notes.ts';

/** The rest of MCP, on `/mcp`: McpSubscriptionsModule's listen route sits in front of it. */
@Controller('mcp')
export class McpController implements BeforeApplicationShutdown {
  private readonly mcp: McpHttpHandler;
  private readonly mcpNode: ReturnType<typeof toNodeHandler>;

  constructor(@Inject(SubscriptionHub) hub: SubscriptionHub, @Inject(NotesService) notes: NotesService) {
    // With the hub as its bus, the SDK's handler can never serve a listen past the read check, and its
    // notify.* reaches listen streams too.
    this.mcp = createMcpHandler(() => createMcpServer(notes), { bus: hub });
    this.mcpNode = toNodeHandler(this.mcp);
  }

  @All()
  serve(@Req() req: IncomingMessage & AuthedRequest, @Res() res: ServerResponse): Promise<void> {
    return this.mcpNode(req, res, req.body);
  }

  /** The module ends every listen stream at the same stage of shutdown. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.mcp.close();
  }
}
