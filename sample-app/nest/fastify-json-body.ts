/**
 * JSON bodies on Nest's Fastify platform. Fastify parses them itself, before any guard runs (on
 * Express the sample parses REST bodies in `JsonBodyMiddleware` and none on the MCP path), so its JSON
 * parser is kept and only told what to do with a body that is not JSON:
 *
 * - on a REST route, the sample's 400 naming `body` (Fastify's own error would reach the exception
 *   filter as a bare message, without the field);
 * - on the MCP route, nothing yet: the text is left as the body, so that the guards answer first (a
 *   request without a valid token gets its 401 whatever its body) and then listen, or the SDK, answers
 *   it with JSON-RPC's parse error, as they do on Express.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { invalidJsonBody } from './dto.ts';

/** The Fastify instance under Nest's Fastify platform (Nest's own copy of Fastify, typed as it is). */
type NestFastifyInstance = ReturnType<ReturnType<NestFastifyApplication['getHttpAdapter']>['getInstance']>;
type JsonParser = (request: unknown, text: string, done: (error: Error | null, body?: unknown) => void) => void;

/** Replaces the `application/json` parser of `fastify` (before it is ready) as described above. */
export function useFastifyJsonBodies(fastify: NestFastifyInstance, mcpPath: string): void {
  // Fastify's own parser, with its defaults (prototype poisoning refused); it is the callback form.
  const parseJson = fastify.getDefaultJsonParser('error', 'error') as JsonParser;
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, text, done) => {
    const onMcpRoute = request.routeOptions.url === mcpPath;
    parseJson(request, text as string, (error, body) => {
      // On the MCP route a string body is always the text as sent, for listen and the SDK to parse (a
      // JSON string literal too, which they refuse as what it is, not as text that is not JSON).
      if (onMcpRoute && (error !== null || typeof body === 'string')) done(null, text);
      else if (error !== null) done(invalidJsonBody());
      else done(null, body);
    });
  });
}
