/**
 * JSON bodies for the REST routes on Nest's Express platform (on Fastify's, Fastify parses them: see
 * `fastify-json-body.ts`). The MCP path has no body parser in front of it: the listen route reads MCP
 * bodies itself, after the guards, so that a request without a valid token gets its 401 whatever its
 * body.
 */
import { Injectable, type NestMiddleware } from '@nestjs/common';
import express, { type NextFunction, type Request, type Response } from 'express';
import { invalidJsonBody } from './dto.ts';

const parse = express.json();

@Injectable()
export class JsonBodyMiddleware implements NestMiddleware {
  use(req: Request, res: Response, next: NextFunction): void {
    parse(req, res, (error?: unknown) => {
      const failed = (error as { type?: unknown } | undefined)?.type === 'entity.parse.failed';
      next(failed ? invalidJsonBody() : error);
    });
  }
}
