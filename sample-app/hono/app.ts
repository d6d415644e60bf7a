/**
 * The Hono sample: a small notes service with its own bearer auth, REST API and MCP server (the official
 * SDK, through its web-standard `fetch` face), to which `mcp-subscriptions` adds `subscriptions/listen`
 * through its Hono middleware. It serves the sample apps' contract (the same one the Express, Fastify and
 * Nest samples serve), from the same shared services; `main.ts` starts it on `@hono/node-server`.
 */
import type { AuthInfo } from '@modelcontextprotocol/server';
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { type SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/hono';
import { authenticate, principalOf, toAuthInfo } from '../shared/auth.ts';
import { sampleStats } from '../shared/bus.ts';
import { isCatalogName } from '../shared/catalog-service.ts';
import { DEFAULT_CONFIG, type SampleConfig } from '../shared/config.ts';
import { invalid, isServiceError } from '../shared/errors.ts';
import { acceptsSubscription, type NotesService } from '../shared/notes-service.ts';
import { offer } from '../shared/offer.ts';
import type { TasksService } from '../shared/tasks-service.ts';
import { createSampleServices } from '../shared/services.ts';

/** The server's identity: in `server/discover` results and in the terminal result of listen streams. */
export const SERVER_INFO = Object.freeze({ name: 'mcp-subscriptions-hono-sample', version: '0.1.0' });

/** The largest REST request body read: `express.json()`'s default, as in the Express sample. */
const REST_BODY_LIMIT = 100 * 1024;

/**
 * The app's context variables: `auth`, the caller in the SDK's `AuthInfo` shape (what the listen
 * middleware's default principal reads, and what the SDK's handler is given as `authInfo`); `parsedBody`,
 * the MCP body the listen middleware read, left for the SDK's handler (the SDK's Hono convention).
 */
export interface SampleEnv {
  Variables: { auth: AuthInfo; parsedBody: unknown };
}

/** What {@link createApp} returns. */
export interface HonoSample {
  /** The Hono app; serve its `fetch` (`serve({ fetch: app.fetch })` from `@hono/node-server`, `main.ts`). */
  readonly app: Hono<SampleEnv>;
  /** The hub the host services publish to and every listen stream is served from. */
  readonly hub: SubscriptionHub;
  /** The notes store behind the REST API and the MCP resources. */
  readonly notes: NotesService;
  /** The tasks store behind the REST API and listen's `taskIds`. */
  readonly tasks: TasksService;
  /** Resolves once the hub's bus is connected (Redis, with `REDIS_URL`): see `SampleBus.ready()`. */
  readonly ready: () => Promise<void>;
  /**
   * Ends every open listen stream gracefully (its terminal result, `resultType: "complete"`), then
   * closes the SDK's MCP handler and the bus. Does not close the HTTP server. Idempotent, and safe to destructure.
   */
  readonly close: () => Promise<void>;
}

/**
 * The host app's own auth, in front of everything: a missing or unknown bearer token gets 401 with
 * `WWW-Authenticate: Bearer` before any MCP handling. On success `c.get('auth')` is the SDK's `AuthInfo`.
 */
function bearerAuth(options: { readonly conformance: boolean }): MiddlewareHandler<SampleEnv> {
  return async (c, next) => {
    const caller = authenticate(c.req.header('authorization'), options);
    if (caller === undefined) {
      c.header('WWW-Authenticate', 'Bearer');
      return c.json({ error: 'unauthorized', message: 'Missing or unknown bearer token' }, 401);
    }
    c.set('auth', toAuthInfo(caller));
    await next();
    return undefined;
  };
}

/** The authenticated principal of a request that passed {@link bearerAuth}. */
function principal(c: Context<SampleEnv>): string {
  const sub = principalOf(c.get('auth'));
  // Unreachable behind bearerAuth; refusing beats acting for nobody.
  if (sub === undefined) throw new Error('request reached a route without passing bearer auth');
  return sub;
}

/** `express.json()`'s type: `application/json`, parameters allowed. */
const JSON_TYPE = /^application\/json\s*(?:;|$)/i;

/**
 * A REST request's JSON body as `express.json()` leaves it in the Express sample, so that both answer
 * alike: an empty one is `{}`, one of another type is ignored (a route that needs an object refuses it,
 * naming `body`), and one that does not parse is 400 naming `body`.
 */
async function restBody(c: Context<SampleEnv>): Promise<unknown> {
  if (!JSON_TYPE.test(c.req.header('content-type') ?? '')) return undefined;
  const text = await c.req.text();
  if (text === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalid('body', 'The request body is not valid JSON');
  }
}

/**
 * Builds the Hono sample: the app, its hub and services. Nothing listens yet.
 *
 * @param config - Settings not given take the defaults of {@link DEFAULT_CONFIG}; `port` and `host`
 * are not used here (see `main.ts`).
 *
 * @example
 * ```ts
 * const { app, hub, close } = createApp(loadConfig());
 * const server = serve({ fetch: app.fetch, port: 3000 });
 * hub.resourceUpdated('note://alice/todo');
 * await close();
 * server.close();
 * ```
 */
export function createApp(config: Partial<SampleConfig> = {}): HonoSample {
  const settings: SampleConfig = { ...DEFAULT_CONFIG, ...config };
  const { sampleBus, hub, notes, tasks, catalog, readCheck, mcpHandler } = createSampleServices(settings, SERVER_INFO);

  const listen = mcpSubscriptions<SampleEnv>({
    hub,
    capabilities: offer,
    canRead: readCheck,
    handleSubscribeResource: acceptsSubscription,
    canAccessTask: (taskId, { principal: caller }) => tasks.isOwner(taskId, caller),
    keepAliveMs: settings.keepAliveMs,
    serverInfo: SERVER_INFO,
  });

  // `/api/tasks/` is `/api/tasks`, as in Express's default (non-strict) routing.
  const app = new Hono<SampleEnv>({ strict: false });

  // Listen in front of the SDK's handler; every method, as the Express sample's `app.all('/mcp')`: the
  // SDK answers what is not listen (and 405 to GET and DELETE). The middleware reads a JSON body from a
  // clone and leaves it at `parsedBody`; the request itself reaches the SDK unread.
  app.all('/mcp', bearerAuth({ conformance: settings.conformance }), listen, (c) =>
    mcpHandler.fetch(c.req.raw, { authInfo: c.get('auth'), parsedBody: c.get('parsedBody') }),
  );

  app.use(bearerAuth({ conformance: false }));

  const api = new Hono<SampleEnv>({ strict: false });
  api.use(
    bodyLimit({
      maxSize: REST_BODY_LIMIT,
      onError: (c) => c.json({ error: 'invalid_request', message: 'request entity too large' }, 413),
    }),
  );
  api.put('/notes/:owner/:name', async (c) => {
    const { created, note } = notes.put(principal(c), c.req.param('owner'), c.req.param('name'), await restBody(c));
    return c.json(note, created ? 201 : 200);
  });
  api.delete('/notes/:owner/:name', (c) => {
    notes.delete(principal(c), c.req.param('owner'), c.req.param('name'));
    return c.body(null, 204);
  });
  api.post('/catalog/:catalog', (c) => {
    const name = c.req.param('catalog');
    if (!isCatalogName(name)) return c.notFound();
    return c.json({ notified: catalog.changed(name) }, 202);
  });
  api.post('/tasks', (c) => c.json(tasks.create(principal(c)), 201));
  api.post('/tasks/:taskId/status', async (c) =>
    c.json(tasks.setStatus(principal(c), c.req.param('taskId'), await restBody(c)), 200),
  );
  api.get('/subscriptions/stats', (c) => c.json(sampleStats(hub.stats(), sampleBus)));
  app.route('/api', api);

  app.notFound((c) => c.json({ error: 'not_found', message: 'No such route' }, 404));
  app.onError((error, c) => {
    if (isServiceError(error)) return c.json(error.toJSON(), error.status);
    console.error('[sample-app] request failed:', error);
    return c.json({ error: 'internal_error', message: 'Internal server error' }, 500);
  });

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
