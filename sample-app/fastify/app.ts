/**
 * The Fastify sample: a small notes service with its own bearer auth, REST API and MCP server (the
 * official SDK), to which `mcp-subscriptions` adds `subscriptions/listen` through its Fastify plugin.
 * It serves the sample apps' contract (the same one the Express and Nest samples serve), from the same
 * shared services; `main.ts` starts it.
 */
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { AuthInfo } from '@modelcontextprotocol/server';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type onRequestHookHandler,
} from 'fastify';
import { type SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/fastify';
import { authenticate, principalOf, toAuthInfo } from '../shared/auth.ts';
import { sampleStats } from '../shared/bus.ts';
import { isCatalogName } from '../shared/catalog-service.ts';
import { DEFAULT_CONFIG, type SampleConfig } from '../shared/config.ts';
import { isServiceError } from '../shared/errors.ts';
import { acceptsSubscription, type NotesService } from '../shared/notes-service.ts';
import { offer } from '../shared/offer.ts';
import type { TasksService } from '../shared/tasks-service.ts';
import { MAX_PARAM_LENGTH } from '../shared/validation.ts';
import { createSampleServices } from '../shared/services.ts';

/** The server's identity: in `server/discover` results and in the terminal result of listen streams. */
export const SERVER_INFO = Object.freeze({ name: 'mcp-subscriptions-fastify-sample', version: '0.1.0' });

/** The MCP route's URL. */
export const MCP_PATH = '/mcp';

/**
 * The largest MCP request body read: 4 MiB, the SDK's own limit (and the one the Express sample's
 * listen middleware reads up to), rather than Fastify's 1 MiB default.
 */
const MCP_BODY_LIMIT = 4 * 1024 * 1024;

/** The largest REST request body read: `express.json()`'s default, as in the Express sample. */
const REST_BODY_LIMIT = 100 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The caller, set by the sample's bearer auth in the SDK's `AuthInfo` shape: what the
     * `mcp-subscriptions` plugin's default principal reads (`extra.sub`), and what the SDK's handler
     * is given as `req.auth`.
     */
    auth?: AuthInfo;
  }
}

/** What {@link createApp} returns. */
export interface FastifySample {
  /** The Fastify app, its routes registered; `app.listen()` starts it (`main.ts`). */
  readonly app: FastifyInstance;
  /** The hub the host services publish to and every listen stream is served from. */
  readonly hub: SubscriptionHub;
  /** The notes store behind the REST API and the MCP resources. */
  readonly notes: NotesService;
  /** The tasks store behind the REST API and listen's `taskIds`. */
  readonly tasks: TasksService;
  /** Resolves once the hub's bus is connected (Redis or PostgreSQL, with `REDIS_URL`, `REDIS_CLUSTER` or `DATABASE_URL`): see `SampleBus.ready()`. */
  readonly ready: () => Promise<void>;
  /**
   * `app.close()`: ends every open listen stream gracefully (its terminal result, `resultType:
   * "complete"`, from the plugin's `preClose` hook), closes the SDK's MCP handler, the HTTP server,
   * the hub and the bus. Idempotent, and safe to destructure.
   */
  readonly close: () => Promise<void>;
}

/** A route's `config` entry that lets `MCP_CONFORMANCE=1` serve requests without `Authorization` there. */
interface AuthRouteConfig {
  readonly conformanceTokenless?: boolean;
}

/** The answer to a missing or unknown bearer token. */
function unauthorized(reply: FastifyReply): void {
  void reply
    .code(401)
    .header('WWW-Authenticate', 'Bearer')
    .send({ error: 'unauthorized', message: 'Missing or unknown bearer token' });
}

/**
 * The host app's own auth, an `onRequest` hook in front of every route (and of the 404 handler): a
 * missing or unknown bearer token gets 401 with `WWW-Authenticate: Bearer` before the body is read
 * and before any MCP handling. On success `request.auth` is set in the SDK's `AuthInfo` shape. Only a
 * route that says so in its config (`/mcp`, under `MCP_CONFORMANCE=1`) serves a request with no
 * `Authorization` header at all, as the principal `conformance`; a wrong token is refused everywhere.
 */
const bearerAuth: onRequestHookHandler = (request, reply, done) => {
  const tokenless = (request.routeOptions.config as AuthRouteConfig).conformanceTokenless === true;
  const caller = authenticate(request.headers.authorization, { conformance: tokenless });
  if (caller === undefined) {
    unauthorized(reply);
    return;
  }
  request.auth = toAuthInfo(caller);
  done();
};

/** The authenticated principal of a request that passed {@link bearerAuth}. */
function principal(request: FastifyRequest): string {
  const sub = principalOf(request.auth);
  // Unreachable behind bearerAuth; refusing beats acting for nobody.
  if (sub === undefined) throw new Error('request reached a route without passing bearer auth');
  return sub;
}

/** Fastify's errors for a JSON body it could not parse (empty bodies are let through, see `restJson`). */
const MALFORMED_JSON = new Set(['FST_ERR_CTP_INVALID_JSON_BODY', 'FST_ERR_CTP_EMPTY_JSON_BODY']);

/**
 * Maps errors to the contract's JSON errors: a service's own status, Fastify's 4xx (an unparseable
 * JSON body is a 400 naming `body`), else 500. The MCP route answers its own (see `mcpErrors`).
 */
function restErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (isServiceError(error)) {
    void reply.code(error.status).send(error.toJSON());
    return;
  }
  if (MALFORMED_JSON.has(error.code)) {
    void reply
      .code(400)
      .send({ error: 'invalid_request', message: 'The request body is not valid JSON', field: 'body' });
    return;
  }
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // Fastify's own 4xx (a body over the limit, a malformed Content-Length, …) carry messages made to be shown.
    void reply.code(status).send({ error: 'invalid_request', message: error.message });
    return;
  }
  request.log.error({ err: error }, 'request failed');
  void reply.code(500).send({ error: 'internal_error', message: 'Internal server error' });
}

/**
 * What Fastify refuses before routing, without running any hook: a path that is not validly
 * percent-encoded (`/api/notes/%zz/x`). The caller's token is checked first, as on every route.
 */
function routingErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (authenticate(request.headers.authorization, { conformance: false }) === undefined) {
    unauthorized(reply);
    return;
  }
  const message = error.code === 'FST_ERR_BAD_URL' ? 'The request path is not validly percent-encoded' : 'Bad request';
  void reply.code(error.statusCode ?? 400).send({ error: 'invalid_request', message });
}

/** A JSON-RPC error with no request id, as the SDK answers a request it could not read. */
function jsonRpcError(reply: FastifyReply, status: number, code: number, message: string): void {
  void reply.code(status).send({ jsonrpc: '2.0', error: { code, message }, id: null });
}

/**
 * The MCP route's errors, in JSON-RPC's shape as the SDK words its own: what Fastify refuses before
 * the route's handler runs (a body over the limit, a malformed Content-Length).
 */
function mcpErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const status = error.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    jsonRpcError(reply, status, -32000, error.message);
    return;
  }
  request.log.error({ err: error }, 'MCP request failed');
  jsonRpcError(reply, 500, -32603, 'Internal server error');
}

/** A Content-Type that names JSON (`application/json`, `application/*+json`, parameters allowed), as MCP reads it. */
const JSON_CONTENT_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Builds the Fastify sample: the app, its hub and services. Nothing listens yet; the app's plugins
 * load on `app.ready()` or `app.listen()`.
 *
 * @param config - Settings not given take the defaults of {@link DEFAULT_CONFIG}; `port` and `host`
 * are not used here (see `main.ts`).
 *
 * @example
 * ```ts
 * const { app, hub, close } = createApp(loadConfig());
 * await app.listen({ port: 3000 });
 * hub.resourceUpdated('note://alice/todo');
 * await close();
 * ```
 */
export function createApp(config: Partial<SampleConfig> = {}): FastifySample {
  const settings: SampleConfig = { ...DEFAULT_CONFIG, ...config };
  const { sampleBus, hub, notes, tasks, catalog, readCheck, mcpHandler } = createSampleServices(settings, SERVER_INFO);
  const nodeHandler = toNodeHandler(mcpHandler);

  // Fastify's own log lines (request failures, the plugin's warnings) go to stderr: stdout carries the
  // one `listening on` line.
  const app = Fastify({
    logger: { level: 'warn', stream: process.stderr },
    frameworkErrors: routingErrors,
    // `/api/tasks/` is `/api/tasks`, as in Express's default (non-strict) routing; a note name of 128
    // characters is routed, and a longer one refused by the notes service with 400, not by the router.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
  });
  app.decorateRequest('auth', undefined);
  app.addHook('onRequest', bearerAuth);
  app.setErrorHandler(restErrors);
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({ error: 'not_found', message: 'No such route' });
  });

  // The MCP route, in a context of its own: its body parser and error answers are MCP's, not REST's.
  void app.register(async (mcp) => {
    // Listen first: the plugin wraps the handler of the MCP route registered after it, so that route's
    // hooks (the bearer auth above) and parser have run when it decides whether a request is listen.
    await mcp.register(mcpSubscriptions, {
      hub,
      capabilities: offer,
      canRead: readCheck,
      handleSubscribeResource: acceptsSubscription,
      canAccessTask: (taskId, { principal: caller }) => tasks.isOwner(taskId, caller),
      keepAliveMs: settings.keepAliveMs,
      serverInfo: SERVER_INFO,
      path: MCP_PATH,
    });

    // Every body is read (up to the route's limit) and none is refused here, so that MCP answers it: a
    // JSON one is parsed by Fastify's own parser; one that is not JSON, or does not parse, is kept as its
    // text. The plugin then negotiates and parses a listen exactly as on any other host (415 for a
    // Content-Type that is not JSON, -32700 for a body that does not parse); the route below answers the rest.
    const json = mcp.getDefaultJsonParser('error', 'error');
    mcp.removeAllContentTypeParsers();
    mcp.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
      const text = body.toString();
      if (!JSON_CONTENT_TYPE.test(request.headers['content-type'] ?? '')) done(null, text);
      else void json(request, text, (error, parsed) => done(null, error === null ? parsed : text));
    });
    mcp.setErrorHandler(mcpErrors);

    // Every method, as the Express sample's `app.all('/mcp')`: the SDK answers what is not listen (and
    // 405 with `Allow: POST` to GET and DELETE).
    mcp.all(
      MCP_PATH,
      { bodyLimit: MCP_BODY_LIMIT, config: { conformanceTokenless: settings.conformance } satisfies AuthRouteConfig },
      (request, reply) => {
        if (typeof request.body === 'string') {
          // A body that is not JSON, and no listen (the plugin took those): the SDK's own answer to it.
          if (JSON_CONTENT_TYPE.test(request.headers['content-type'] ?? '')) {
            jsonRpcError(reply, 400, -32700, 'Parse error: the request body is not valid JSON');
          } else {
            jsonRpcError(reply, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
          }
          return;
        }
        // The SDK writes Node's response itself; it reads the caller from `req.auth`.
        reply.hijack();
        return nodeHandler(Object.assign(request.raw, { auth: request.auth }), reply.raw, request.body);
      },
    );
  });

  void app.register(
    (api, _options, loaded) => {
      // The REST API reads JSON bodies as `express.json()` does in the Express sample, so that both
      // answer alike: up to 100 KiB, an empty one as `{}`, and a body of another type is ignored (a route
      // that needs an object refuses it, naming `body`). Unlike `express.json()`, Fastify's parser
      // refuses a `__proto__` key (400, not valid JSON).
      const json = api.getDefaultJsonParser('error', 'error');
      api.removeContentTypeParser('application/json');
      api.addContentTypeParser(
        'application/json',
        { parseAs: 'string', bodyLimit: REST_BODY_LIMIT },
        (request, body, done) => {
          const text = body.toString();
          if (text.length === 0) done(null, {});
          else void json(request, text, done);
        },
      );
      api.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: REST_BODY_LIMIT }, (_request, _body, done) =>
        done(null, undefined),
      );

      api.put<{ Params: { owner: string; name: string } }>('/notes/:owner/:name', (request, reply) => {
        const { owner, name } = request.params;
        const { created, note } = notes.put(principal(request), owner, name, request.body);
        void reply.code(created ? 201 : 200).send(note);
      });
      api.delete<{ Params: { owner: string; name: string } }>('/notes/:owner/:name', (request, reply) => {
        notes.delete(principal(request), request.params.owner, request.params.name);
        void reply.code(204).send();
      });
      api.post<{ Params: { catalog: string } }>('/catalog/:catalog', (request, reply) => {
        const name = request.params.catalog;
        if (!isCatalogName(name)) {
          void reply.callNotFound();
          return;
        }
        void reply.code(202).send({ notified: catalog.changed(name) });
      });
      api.post('/tasks', (request, reply) => {
        void reply.code(201).send(tasks.create(principal(request)));
      });
      api.post<{ Params: { taskId: string } }>('/tasks/:taskId/status', (request, reply) => {
        void reply.code(200).send(tasks.setStatus(principal(request), request.params.taskId, request.body));
      });
      api.get('/subscriptions/stats', (_request, reply) => {
        void reply.send(sampleStats(hub.stats(), sampleBus));
      });
      loaded();
    },
    { prefix: '/api' },
  );

  // The plugin's preClose hook has completed every listen stream by now; the SDK's own in-flight
  // responses are ended before the server waits for its connections to close.
  app.addHook('preClose', async () => {
    await mcpHandler.close();
  });
  app.addHook('onClose', async () => {
    try {
      await hub.close();
    } finally {
      await sampleBus.close();
    }
  });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => (closing ??= app.close());

  return { app, hub, notes, tasks, ready: () => sampleBus.ready(), close };
}
