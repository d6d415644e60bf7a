/**
 * Maps every error to the JSON the Express sample answers with: a service's own status and body, a
 * guard's, a pipe's or the JSON body parser's answer as it is, another 4xx of a body parser, a 404 for
 * an unknown route, else 500.
 */
import {
  Catch,
  HttpException,
  HttpStatus,
  NotFoundException,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import type { Response } from 'express';
import { isServiceError } from '../shared/errors.ts';

/** A body parser's error (`http-errors`): a status, and whether its message is safe to show. */
interface ParserError {
  readonly status?: unknown;
  readonly expose?: unknown;
  readonly message?: unknown;
}

@Catch()
export class AppExceptionFilter implements ExceptionFilter {
  catch(error: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) {
      // A stream already under way (an SSE response) can only be cut.
      res.destroy();
      return;
    }
    if (isServiceError(error)) {
      res.status(error.status).json(error.toJSON());
      return;
    }
    if (error instanceof HttpException) {
      const body = error.getResponse();
      // Nest's own exceptions (an unknown route) carry its generic body; ours carry the app's.
      if (error instanceof NotFoundException && (body as { error?: unknown }).error === 'Not Found') {
        res.status(HttpStatus.NOT_FOUND).json({ error: 'not_found', message: 'No such route' });
        return;
      }
      res.status(error.getStatus()).json(typeof body === 'string' ? { error: 'error', message: body } : body);
      return;
    }
    const { status, expose, message } = (typeof error === 'object' && error !== null ? error : {}) as ParserError;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      res.status(status).json({ error: 'invalid_request', message: expose === true ? String(message) : 'Bad request' });
      return;
    }
    console.error('[sample-app] request failed:', error);
    res.status(HttpStatus.INTERNAL_SERVER_ERROR).json({ error: 'internal_error', message: 'Internal server error' });
  }
}
