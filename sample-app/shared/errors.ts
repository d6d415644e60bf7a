/**
 * The host services' errors. Each carries the HTTP status the REST API answers with, so the Express
 * error handler and a Nest exception filter map them the same way. A service throws before it changes
 * anything, so an error never leaves a half-applied change or an emitted event behind.
 */

/** Stable codes of the host services' errors; compare these, not classes. */
export const ServiceErrorCode = Object.freeze({
  Invalid: 'invalid_request',
  Forbidden: 'forbidden',
  NotFound: 'not_found',
});

/** A refused host-service call: a status, a stable code and a message safe to show the caller. */
export class ServiceError extends Error {
  readonly status: 400 | 403 | 404;
  readonly code: string;
  /** The request field at fault, for a validation error. */
  readonly field: string | undefined;

  constructor(status: 400 | 403 | 404, code: string, message: string, field?: string) {
    super(message);
    this.name = 'ServiceError';
    this.status = status;
    this.code = code;
    this.field = field;
  }

  /** The JSON body the REST API answers with. */
  toJSON(): { error: string; message: string; field?: string } {
    return { error: this.code, message: this.message, ...(this.field !== undefined ? { field: this.field } : {}) };
  }
}

/** A request field that failed validation: HTTP 400 naming the field. */
export function invalid(field: string, message: string): ServiceError {
  return new ServiceError(400, ServiceErrorCode.Invalid, message, field);
}

/** Another principal's note or task: HTTP 403. */
export function forbidden(message: string): ServiceError {
  return new ServiceError(403, ServiceErrorCode.Forbidden, message);
}

/** An unknown note or task: HTTP 404. */
export function notFound(message: string): ServiceError {
  return new ServiceError(404, ServiceErrorCode.NotFound, message);
}

/** Whether `error` is a {@link ServiceError}, by shape (works across module copies). */
export function isServiceError(error: unknown): error is ServiceError {
  return (
    error instanceof Error &&
    typeof (error as Partial<ServiceError>).status === 'number' &&
    (Object.values(ServiceErrorCode) as string[]).includes((error as Partial<ServiceError>).code as string)
  );
}
