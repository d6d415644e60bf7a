import type { IncomingMessage, ServerResponse } from 'node:http';
import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import type { AuthInfo } from '@modelcontextprotocol/server';

/** A request once {@link AuthGuard} let it through (and Nest's JSON body parser ran). */
export type AuthedRequest = IncomingMessage & { auth?: AuthInfo; body?: unknown };

// A token table standing in for your identity provider.
const USERS = new Map(Object.entries({ 'alice-token': 'alice', 'bob-token': 'bob' }));

/** 401 without a known `Authorization: Bearer <token>`; otherwise sets `req.auth`. */
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
