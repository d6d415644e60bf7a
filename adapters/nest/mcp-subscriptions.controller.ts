/**
 * The listen route, and the class whose context the host's guards see for each URI. Both are made per
 * module definition, since the path and the guards come from `forRoot()` / `forRootAsync()`.
 */
import type { ServerResponse } from 'node:http';
import {
  Controller,
  HttpCode,
  HttpStatus,
  Inject,
  Injectable,
  Next,
  Post,
  Req,
  Res,
  SetMetadata,
  UseGuards,
  type CanActivate,
  type Type,
} from '@nestjs/common';
import { MCP_SUBSCRIPTIONS_ROUTE } from './mcp-subscriptions.constants.ts';
import type { McpReadContext, McpRequest } from './mcp-subscriptions.interfaces.ts';
import { McpSubscriptionsService } from './mcp-subscriptions.service.ts';

type Guards = readonly (Type<CanActivate> | CanActivate)[];

/**
 * A controller with one route, `POST <path>`, behind the global guards and `guards`, exactly like any
 * controller with `@UseGuards(...guards)`. It serves `subscriptions/listen` (and `notifications/cancelled`
 * naming one of the caller's streams) and hands every other request on, through `next()`, to the route
 * that serves the rest of MCP on the same path: Express's next route, or on Fastify the host route's
 * own handler (fastify-route.ts).
 */
export function createListenController(path: string, guards: Guards): Type<unknown> {
  @Controller(path)
  @UseGuards(...guards)
  class McpSubscriptionsController {
    constructor(@Inject(McpSubscriptionsService) private readonly subscriptions: McpSubscriptionsService) {}

    // 200 is Node's own default: a request passed on reaches the next route with its status untouched.
    @Post()
    @HttpCode(HttpStatus.OK)
    @SetMetadata(MCP_SUBSCRIPTIONS_ROUTE, true)
    listen(@Req() req: McpRequest, @Res() res: ServerResponse, @Next() next: (error?: unknown) => void): Promise<void> {
      return this.subscriptions.serve(req, res, next);
    }
  }
  return McpSubscriptionsController;
}

/**
 * A provider carrying the same guards as the listen route: the per-URI check runs its `resourcesRead`
 * through Nest's own guard pipeline (global guards first, then these), so each guard is the instance Nest
 * made for this module and runs exactly as on a route.
 */
export function createReadContext(guards: Guards): Type<McpReadContext> {
  @Injectable()
  @UseGuards(...guards)
  class McpSubscriptionsReadContext implements McpReadContext {
    resourcesRead(): boolean {
      return true;
    }
  }
  return McpSubscriptionsReadContext;
}
