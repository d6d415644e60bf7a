/**
 * Maps every error to the JSON the Express sample answers with: a service's own status and body, a
 * guard's, a pipe's or the JSON body parser's answer as it is, another 4xx of a body parser, a 404 for
 * an unknown route, else 500. It answers through Nest's HTTP adapter, so the same filter serves on
 * Nest's Express and Fastify platforms.
 */
import type { ServerResponse } from 'node:http';
import {
  Catch,
  HttpException,
  HttpStatus,
  Inject,
  NotFoundException,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Response } from 'express';
import type { FastifyReply } from 'fastify';
import { isServiceError } from '../shared/errors.ts';

/** A body parser's error (`http-errors`): a status, and whether its message is safe to show. */
interface ParserError {
  readonly status?: unknown;
  readonly expose?: unknown;
  readonly message?: unknown;
}

/** Node's response under the platform's: Fastify's reply wraps it, Express's response is it. */
function nodeResponse(res: Response | FastifyReply): ServerResponse {
  return 'raw' in res ? res.raw : res;
}

@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  constructor(@Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost) {}

  catch(error: unknown, host: ArgumentsHost): void {
    const { httpAdapter } = this.adapterHost;
    const res = host.switchToHttp().getResponse<Response | FastifyReply>();
    if (httpAdapter.isHeadersSent(res)) {
      // A stream already under way (an SSE response; on Fastify, any response handed to Node's by
      // `reply.hijack()`) can only be cut.
      nodeResponse(res).destroy();
      return;
    }
    const reply = (status: number, body: unknown): void => {
      httpAdapter.reply(res, body, status);
    };
    if (isServiceError(error)) {
      reply(error.status, error.toJSON());
      return;
    }
    if (error instanceof HttpException) {
      const body = error.getResponse();
      // Nest's own exceptions (an unknown route) carry its generic body; ours carry the app's.
      if (error instanceof NotFoundException && (body as { error?: unknown }).error === 'Not Found') {
        reply(HttpStatus.NOT_FOUND, { error: 'not_found', message: 'No such route' });
        return;
      }
      // A bare message: Nest's mapping of Fastify's own 4xx errors (a body over its limit, a media type
      // it has no parser for), whose messages are safe to show.
      const status = error.getStatus();
      const code = status < 500 ? 'invalid_request' : 'error';
      reply(status, typeof body === 'string' ? { error: code, message: body } : body);
      return;
    }
    const { status, expose, message } = (typeof error === 'object' && error !== null ? error : {}) as ParserError;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      reply(status, { error: 'invalid_request', message: expose === true ? String(message) : 'Bad request' });
      return;
    }
    console.error('[sample-app] request failed:', error);
    reply(HttpStatus.INTERNAL_SERVER_ERROR, { error: 'internal_error', message: 'Internal server error' });
  }
}
