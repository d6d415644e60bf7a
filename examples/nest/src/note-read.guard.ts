/**
 * The read check of `resources/read`, as a guard on the MCP route. McpSubscriptionsModule runs this
 * very guard for each URI a listen asks for (it is in the module's `guards`), so the acknowledgement
 * and `resources/read` can never disagree.
 *
 * It has a file of its own: app.module.ts names it in `forRoot({ guards })` and imports
 * mcp.controller.ts, which names it in `@UseGuards()`. Declared in app.module.ts, it would still be
 * undefined when that decorator runs (an import cycle), and Nest would report
 * "Invalid guard passed to @UseGuards()".
 */
import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { principalOf, type AuthedRequest } from './auth.guard';
import { canRead } from './notes.service';

@Injectable()
export class NoteReadGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AuthedRequest>();
    const message = req.body as { method?: unknown; params?: { uri?: unknown } } | undefined;
    if (message?.method !== 'resources/read' || typeof message.params?.uri !== 'string') return true;
    const principal = principalOf(req.auth);
    return principal !== undefined && canRead(message.params.uri, principal);
  }
}
