/**
 * THE read check of the Nest sample: a guard on the MCP route that lets a `resources/read` through only
 * when the caller may read the note. `mcp-subscriptions` reuses this very guard for each URI a listen
 * request names (it is one of the module's `guards`), so the acknowledgement and `resources/read`
 * cannot disagree.
 */
import { HttpException, HttpStatus, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { ResourceNotFoundError } from '@modelcontextprotocol/server';
import { principalOf } from '../shared/auth.ts';
import { canRead } from '../shared/notes-service.ts';
import type { AuthedRequest } from './bearer-auth.guard.ts';

/**
 * The answer to a `resources/read` of a note the caller may not read: exactly the SDK's answer for a
 * note that does not exist (HTTP 200, JSON-RPC -32602 "Resource not found"), so a refusal reveals
 * nothing about existence.
 */
export class NoteNotFoundException extends HttpException {
  constructor(id: unknown, uri: string) {
    const error = new ResourceNotFoundError(uri);
    super(
      { jsonrpc: '2.0', id: id ?? null, error: { code: error.code, message: error.message, data: error.data } },
      HttpStatus.OK,
    );
  }
}

@Injectable()
export class NoteReadGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AuthedRequest>();
    const message = req.body as { id?: unknown; method?: unknown; params?: { uri?: unknown } } | undefined;
    if (message?.method !== 'resources/read') return true;
    const uri = message.params?.uri;
    // A malformed read is the MCP server's to refuse, with the protocol's own error.
    if (typeof uri !== 'string') return true;
    const principal = principalOf(req.auth);
    if (principal !== undefined && canRead(principal, uri)) return true;
    throw new NoteNotFoundException(message.id, uri);
  }
}
