/**
 * The REST API's request bodies as class-validator DTOs. A body that fails gets 400 naming the field
 * (see {@link validBody}); the services validate again, with the same rules as the Express sample.
 */
import { BadRequestException, ValidationPipe, type Type } from '@nestjs/common';
import type { ValidationError } from 'class-validator';
import { IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { MAX_NOTE_TEXT } from '../shared/notes-service.ts';
import { MAX_STATUS_MESSAGE, TASK_STATUSES, type TaskStatus } from '../shared/tasks-service.ts';

/** `PUT /api/notes/:owner/:name`. */
export class PutNoteDto {
  @IsString()
  @MaxLength(MAX_NOTE_TEXT)
  text!: string;
}

/** `POST /api/tasks/:taskId/status`. */
export class TaskStatusDto {
  @IsIn(TASK_STATUSES)
  status!: TaskStatus;

  @IsOptional()
  @IsString()
  @MaxLength(MAX_STATUS_MESSAGE)
  statusMessage?: string;
}

function firstFailure(errors: ValidationError[]): { field: string; message: string } {
  const [error] = errors;
  if (error === undefined) return { field: 'body', message: 'Expected the request body to be a JSON object' };
  const constraints = error.constraints ?? {};
  // The type is the first thing wrong with `{"text": 5}`, whatever order the decorators ran in.
  const message =
    constraints['isString'] ?? constraints['isIn'] ?? Object.values(constraints)[0] ?? `Invalid \`${error.property}\``;
  return { field: error.property, message };
}

/**
 * The validation pipe of one `@Body()`. The DTO class is named here because the sample runs through
 * tsx, which emits no decorator metadata for `ValidationPipe` to find the parameter's type in.
 */
export function validBody(dto: Type<unknown>): ValidationPipe {
  return new ValidationPipe({
    expectedType: dto,
    exceptionFactory: (errors) => new BadRequestException({ error: 'invalid_request', ...firstFailure(errors) }),
  });
}

/**
 * The answer to a REST body that is not JSON at all, on either platform (Express's `express.json()` in
 * `JsonBodyMiddleware`, Fastify's own JSON parser in `useFastifyJsonBodies()`): 400 naming `body`.
 */
export function invalidJsonBody(): BadRequestException {
  return new BadRequestException({
    error: 'invalid_request',
    message: 'The request body is not valid JSON',
    field: 'body',
  });
}
