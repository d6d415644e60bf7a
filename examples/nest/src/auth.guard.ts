/**
 * The app's own bearer auth, as a global guard (`APP_GUARD` in app.module.ts): a fixed token table
 * standing in for your identity provider. It sets `req.auth` in the SDK's `AuthInfo` shape, which both
 * the SDK's handler (as `ctx.http.authInfo`) and mcp-subscriptions (the principal is
 * `req.auth.extra.sub`) read.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { AuthInfo } from '@modelcontextprotocol/server';

/** A request once {@link AuthGuard} let it through (and Nest's JSON body parser ran). */
export type AuthedRequest = IncomingMessage & { auth?: AuthInfo; body?: unknown };

const USERS: ReadonlyMap<string, string> = new Map([
  ['alice-token', 'alice'],
  ['bob-token', 'bob'],
]);

@Injectable()
export class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<AuthedRequest>();
    const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const user = token === undefined ? undefined : USERS.get(token);
    if (token === undefined || user === undefined) {
      context.switchToHttp().getResponse<ServerResponse>().setHeader('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException();
    }
    req.auth = { token, clientId: 'notes-example', scopes: [], extra: { sub: user } };
    return true;
  }
}

/** The user an `AuthInfo` set by {@link AuthGuard} belongs to. */
export function principalOf(auth: AuthInfo | undefined): string | undefined {
  const sub = auth?.extra?.['sub'];
  return typeof sub === 'string' ? sub : undefined;
}
