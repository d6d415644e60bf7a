/**
 * The host app's own authentication, as a global guard (`APP_GUARD`): a missing or unknown bearer
 * token gets 401 with `WWW-Authenticate: Bearer` before any handler runs, on every route, the MCP
 * route and the listen route included.
 */
import {
  Inject,
  Injectable,
  UnauthorizedException,
  createParamDecorator,
  type CanActivate,
  type ExecutionContext,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { AuthInfo } from '@modelcontextprotocol/server';
import type { Request } from 'express';
import type { FastifyRequest } from 'fastify';
import { authenticate, principalOf, toAuthInfo } from '../shared/auth.ts';
import type { SampleConfig } from '../shared/config.ts';
import { MCP_PATH, SAMPLE_CONFIG } from './config.ts';

/**
 * A request as guards and handlers see it (Express's on Nest's Express platform, Fastify's on its
 * Fastify one) after {@link BearerAuthGuard}: `req.auth` is the SDK's `AuthInfo`.
 */
export type AuthedRequest = (Request | FastifyRequest) & { auth?: AuthInfo };

/**
 * Resolves the caller from `Authorization: Bearer <token>` and sets `req.auth` in the SDK's `AuthInfo`
 * shape, which `mcp-subscriptions` (its default principal reads `extra.sub`) and the SDK's handler
 * (through `toNodeHandler`) both read. Under `MCP_CONFORMANCE=1`, a token-less request to the MCP path
 * is the principal `conformance`.
 */
@Injectable()
export class BearerAuthGuard implements CanActivate {
  constructor(
    @Inject(SAMPLE_CONFIG) private readonly config: SampleConfig,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const { httpAdapter } = this.adapterHost;
    const http = context.switchToHttp();
    const req = http.getRequest<AuthedRequest>();
    const caller = authenticate(req.headers.authorization, {
      conformance: this.config.conformance && pathOf(String(httpAdapter.getRequestUrl(req))) === MCP_PATH,
    });
    if (caller === undefined) {
      httpAdapter.setHeader(http.getResponse(), 'WWW-Authenticate', 'Bearer');
      throw new UnauthorizedException({ error: 'unauthorized', message: 'Missing or unknown bearer token' });
    }
    req.auth = toAuthInfo(caller);
    return true;
  }
}

/** The path of a request URL as received (`/mcp?x=1` is `/mcp`). */
function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

/** The authenticated principal of a request that passed {@link BearerAuthGuard}. */
export const Principal = createParamDecorator((_data: unknown, context: ExecutionContext): string => {
  const principal = principalOf(context.switchToHttp().getRequest<AuthedRequest>().auth);
  // Unreachable behind the global guard; refusing beats acting for nobody.
  if (principal === undefined) throw new Error('request reached a route without passing bearer auth');
  return principal;
});
