import { All, Controller, Inject, Req, Res, type BeforeApplicationShutdown } from '@nestjs/common';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
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
  serve(@Req() req: FastifyRequest & AuthedRequest, @Res() reply: FastifyReply): Promise<void> {
    // The SDK writes Node's response itself: Fastify must leave the reply alone.
    reply.hijack();
    // The SDK reads the caller from Node's request: hand it the auth your guard set on Fastify's.
    return this.mcpNode(Object.assign(req.raw, { auth: req.auth }), reply.raw, req.body);
  }

  /** The module ends every listen stream at the same stage of shutdown. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.mcp.close();
  }
}
