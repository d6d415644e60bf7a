import type { IncomingHttpHeaders } from 'node:http';
import { Inject, Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { AuthInfo } from '@modelcontextprotocol/server';

/** A request once {@link AuthGuard} let it through: Node's on Express, Fastify's on Fastify (both have `headers`). */
export interface AuthedRequest {
  headers: IncomingHttpHeaders;
  auth?: AuthInfo;
  body?: unknown;
}

// A token table standing in for your identity provider.
const USERS = new Map(Object.entries({ 'alice-token': 'alice', 'bob-token': 'bob' }));

/** 401 without a known `Authorization: Bearer <token>`; otherwise sets `req.auth`. */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(@Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost) {}

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const req = http.getRequest<AuthedRequest>();
    const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const user = token === undefined ? undefined : USERS.get(token);
    if (token === undefined || user === undefined) {
      // Through Nest's HTTP adapter, so that the same guard answers on Express and on Fastify.
      this.adapterHost.httpAdapter.setHeader(http.getResponse(), 'WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException();
    }
    req.auth = { token, clientId: 'notes-example', scopes: [], extra: { sub: user } };
    return true;
  }
}
