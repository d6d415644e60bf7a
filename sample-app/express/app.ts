/**
 * The Express sample: a small notes service with its own bearer auth, REST API and MCP server (the
 * official SDK), to which `mcp-subscriptions` adds `subscriptions/listen`. It serves the sample apps'
 * contract (the same one the Nest sample serves); `main.ts` starts it.
 */
import { toNodeHandler } from '@modelcontextprotocol/node';
import type { AuthInfo } from '@modelcontextprotocol/server';
import express, { type ErrorRequestHandler, type Express, type Request, type RequestHandler } from 'express';
import { type SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { sampleStats } from '../shared/bus.ts';
import { authenticate, principalOf, toAuthInfo } from '../shared/auth.ts';
import { isCatalogName } from '../shared/catalog-service.ts';
import { DEFAULT_CONFIG, type SampleConfig } from '../shared/config.ts';
import { isServiceError } from '../shared/errors.ts';
import { acceptsSubscription, type NotesService } from '../shared/notes-service.ts';
import { offer } from '../shared/offer.ts';
import type { TasksService } from '../shared/tasks-service.ts';
import { createSampleServices } from '../shared/services.ts';

/** The server's identity: in `server/discover` results and in the terminal result of listen streams. */
export const SERVER_INFO = Object.freeze({ name: 'mcp-subscriptions-express-sample', version: '0.1.0' });

/** What {@link createApp} returns. */
export interface ExpressSample {
  /** The Express app; mount it on an HTTP server (`http.createServer(app)`, `app.listen()`). */
  readonly app: Express;
  /** The hub the host services publish to and every listen stream is served from. */
  readonly hub: SubscriptionHub;
  /** The notes store behind the REST API and the MCP resources. */
  readonly notes: NotesService;
  /** The tasks store behind the REST API and listen's `taskIds`. */
  readonly tasks: TasksService;
  /** Resolves once the hub's bus is connected (Redis or PostgreSQL, with `REDIS_URL`, `REDIS_CLUSTER` or `DATABASE_URL`): see `SampleBus.ready()`. */
  readonly ready: () => Promise<void>;
  /**
   * Ends every open listen stream gracefully (its terminal result, `resultType: "complete"`), then
   * closes the SDK's MCP handler and the bus. Does not close the HTTP server. Idempotent, and safe to destructure.
   */
  readonly close: () => Promise<void>;
}

/** An Express request after the bearer-auth middleware: `req.auth` is the SDK's `AuthInfo`. */
type AuthedRequest = Request & { auth?: AuthInfo };

/**
 * The host app's own auth, in front of everything: a missing or unknown bearer token gets 401 with
 * `WWW-Authenticate: Bearer` before any MCP handling. On success `req.auth` is set in the SDK's
 * `AuthInfo` shape, which both `mcp-subscriptions` (its default principal reads `extra.sub`) and the
 * SDK's handler (through `toNodeHandler`) read.
 */
function bearerAuth(options: { readonly conformance: boolean }): RequestHandler {
  return (req, res, next) => {
    const caller = authenticate(req.headers.authorization, options);
    if (caller === undefined) {
      res
        .status(401)
        .set('WWW-Authenticate', 'Bearer')
        .json({ error: 'unauthorized', message: 'Missing or unknown bearer token' });
      return;
    }
    (req as AuthedRequest).auth = toAuthInfo(caller);
    next();
  };
}

/** The authenticated principal of a request that passed {@link bearerAuth}. */
function principal(req: Request): string {
  const sub = principalOf((req as AuthedRequest).auth);
  // Unreachable behind bearerAuth; refusing beats acting for nobody.
  if (sub === undefined) throw new Error('request reached a route without passing bearer auth');
  return sub;
}

/** Maps errors to JSON: a service's own status, a body parser's 4xx, else 500. */
const errorHandler: ErrorRequestHandler = (error: unknown, _req, res, next) => {
  if (res.headersSent) {
    next(error);
    return;
  }
  if (isServiceError(error)) {
    res.status(error.status).json(error.toJSON());
    return;
  }
  const { status, type, expose } = (typeof error === 'object' && error !== null ? error : {}) as {
    status?: unknown;
    type?: unknown;
    expose?: unknown;
  };
  if (type === 'entity.parse.failed') {
    res.status(400).json({ error: 'invalid_request', message: 'The request body is not valid JSON', field: 'body' });
    return;
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // Body-parser errors are safe to show (`expose`); the router's URIError for a path like `%zz` is not.
    const message =
      expose === true
        ? (error as Error).message
        : error instanceof URIError
          ? 'The request path is not validly percent-encoded'
          : 'Bad request';
    res.status(status).json({ error: 'invalid_request', message });
    return;
  }
  console.error('[sample-app] request failed:', error);
  res.status(500).json({ error: 'internal_error', message: 'Internal server error' });
};

/**
 * Builds the Express sample: the app, its hub and services. Nothing listens yet.
 *
 * @param config - Settings not given take the defaults of {@link DEFAULT_CONFIG}; `port` and `host`
 * are not used here (see `main.ts`).
 *
 * @example
 * ```ts
 * const { app, hub, close } = createApp(loadConfig());
 * const server = app.listen(3000);
 * hub.resourceUpdated('note://alice/todo');
 * await close();
 * server.close();
 * ```
 */
export function createApp(config: Partial<SampleConfig> = {}): ExpressSample {
  const settings: SampleConfig = { ...DEFAULT_CONFIG, ...config };
  const { sampleBus, hub, notes, tasks, catalog, readCheck, mcpHandler } = createSampleServices(settings, SERVER_INFO);
  const nodeHandler = toNodeHandler(mcpHandler);

  const listen = mcpSubscriptions({
    hub,
    capabilities: offer,
    canRead: readCheck,
    handleSubscribeResource: acceptsSubscription,
    canAccessTask: (taskId, { principal: caller }) => tasks.isOwner(taskId, caller),
    keepAliveMs: settings.keepAliveMs,
    serverInfo: SERVER_INFO,
  });

  const app = express();
  app.disable('x-powered-by');

  // No body parser in front of the listen middleware: it reads JSON bodies itself and leaves them on
  // req.body for the SDK's handler.
  app.all('/mcp', bearerAuth({ conformance: settings.conformance }), listen, (req, res, next) => {
    nodeHandler(req, res, req.body).catch(next);
  });

  app.use(bearerAuth({ conformance: false }));

  const api = express.Router();
  api.use(express.json());
  api.put('/notes/:owner/:name', (req, res) => {
    const { created, note } = notes.put(principal(req), req.params['owner'], req.params['name'], req.body);
    res.status(created ? 201 : 200).json(note);
  });
  api.delete('/notes/:owner/:name', (req, res) => {
    notes.delete(principal(req), req.params['owner'], req.params['name']);
    res.status(204).end();
  });
  api.post('/catalog/:catalog', (req, res, next) => {
    const name = req.params['catalog'] ?? '';
    if (!isCatalogName(name)) {
      next();
      return;
    }
    res.status(202).json({ notified: catalog.changed(name) });
  });
  api.post('/tasks', (req, res) => {
    res.status(201).json(tasks.create(principal(req)));
  });
  api.post('/tasks/:taskId/status', (req, res) => {
    res.status(200).json(tasks.setStatus(principal(req), req.params['taskId'] ?? '', req.body));
  });
  api.get('/subscriptions/stats', (_req, res) => {
    res.json(sampleStats(hub.stats(), sampleBus));
  });
  app.use('/api', api);

  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found', message: 'No such route' });
  });
  app.use(errorHandler);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      try {
        await hub.close();
      } finally {
        await Promise.all([mcpHandler.close(), sampleBus.close()]);
      }
    })());

  return { app, hub, notes, tasks, ready: () => sampleBus.ready(), close };
}
