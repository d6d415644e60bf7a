/**
 * Validation of REST request bodies and path segments. Every failure is a 400 {@link ServiceError}
 * naming the field, and never echoes more of the value than its type.
 */
import { maxHeaderSize } from 'node:http';
import { invalid } from './errors.ts';

/** A body that is a JSON object; anything else is refused naming `body`. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', 'Expected the request body to be a JSON object (Content-Type: application/json)');
  }
  return body as Record<string, unknown>;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}

/** A required string field, at most `maxLength` UTF-16 units long. */
export function requiredString(body: Record<string, unknown>, field: string, maxLength: number): string {
  const value = body[field];
  if (typeof value !== 'string') {
    throw invalid(
      field,
      value === undefined
        ? `Missing \`${field}\`: expected a string`
        : `Expected \`${field}\` to be a string, got ${typeOf(value)}`,
    );
  }
  if (value.length > maxLength) {
    throw invalid(field, `Expected \`${field}\` to be at most ${maxLength} characters long, got ${value.length}`);
  }
  return value;
}

/** An optional string field: `undefined` when absent. */
export function optionalString(body: Record<string, unknown>, field: string, maxLength: number): string | undefined {
  return body[field] === undefined ? undefined : requiredString(body, field, maxLength);
}

/** A required field whose value is one of `allowed`. */
export function oneOf<const T extends string>(body: Record<string, unknown>, field: string, allowed: readonly T[]): T {
  const value = body[field];
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    const expected = allowed.map((v) => `"${v}"`).join(', ');
    throw invalid(
      field,
      value === undefined
        ? `Missing \`${field}\`: expected one of ${expected}`
        : `Expected \`${field}\` to be one of ${expected}, got ${typeof value === 'string' ? 'another string' : typeOf(value)}`,
    );
  }
  return value as T;
}

/**
 * A principal or the shared space as it appears in a note URI and a REST path: lowercase letters,
 * digits, `_` and `-`, starting with a letter or digit.
 */
export const OWNER_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/**
 * A note's name: letters, digits, `.`, `_` and `-`, starting with a letter or digit. No `/`, no `%`
 * and no leading dot, so `.` and `..` can never be names and a name needs no encoding in a URI.
 */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * The Fastify hosts' `routerOptions.maxParamLength`: Fastify's default, 100, answers 414 to a longer path
 * parameter (measured decoded, each on its own) before any hook or route runs. The longest valid one is
 * a note's name, 128, but the contract answers 400 naming the field to every invalid one, as the Express
 * and Hono hosts do, so the router must refuse no parameter that Node lets through. Node answers 431 to
 * a request head longer than `http.maxHeaderSize` (16 KiB unless `--max-http-header-size` says otherwise)
 * before routing: no parameter can be longer. The default guards regular-expression parameters against
 * ReDoS; no route here has one.
 */
export const MAX_PARAM_LENGTH = maxHeaderSize;

/** A path segment that must match `pattern`; `what` describes the expected form. */
export function segment(field: string, value: unknown, pattern: RegExp, what: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) {
    throw invalid(field, `Expected \`${field}\` to be ${what}`);
  }
  return value;
}
