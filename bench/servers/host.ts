/**
 * The benchmark's host app, in four builds that differ only in who serves `subscriptions/listen`, on
 * which framework, and whether the app exports metrics:
 *
 * - `ours`: Express, the host's bearer auth, `mcpSubscriptions()` in front of the SDK's
 *   `toNodeHandler(createMcpHandler(...))`, the hub as the SDK's bus (the sample app's composition);
 * - `sdk`: the same app without the middleware: the SDK serves listen itself, and the host publishes
 *   through `handler.notify`;
 * - `fastify`: the same app on Fastify 5 (`bench/lib/fastify.ts`: the bearer auth as an `onRequest`
 *   hook), the Fastify plugin registered before the app's own `POST /mcp` route (which hands the rest
 *   of MCP to the SDK's handler), the hub as the SDK's bus. Express is never loaded in it, nor Fastify in
 *   the others (loading a framework alone makes `node:http` dearer: docs/performance.md, finding 3);
 * - `metrics`: `ours` exactly, but before the hub is built it registers an OpenTelemetry `MeterProvider`
 *   with the Prometheus exporter as its reader (`bench/lib/metrics.ts`), whose scrape it serves as
 *   `GET /control/metrics` (issue 21: what metrics on cost). Only this build loads the metrics SDK.
 *
 * All serve the sample app's notes service (its write route `PUT /api/notes/:owner/:name` publishes
 * `resources/updated`), its MCP server, its read check and subscribe hook, plus the `/control/*`
 * routes of `bench/lib/control.ts`. Usage: `node --expose-gc ... bench/servers/host.ts ours|sdk|fastify|metrics`.
 *
 * With `BENCH_REDIS_URL` set (the cross-node scenario), `ours` joins its hub to the other nodes through
 * a `RedisBus` that owns its connections (ioredis), on the channel prefix `BENCH_REDIS_PREFIX` (unique
 * per run, so runs sharing one Redis never hear each other) as node `BENCH_NODE_ID`; it prints its port
 * only once the bus is connected and subscribed, so the load generator never publishes into a gap.
 * With `BENCH_DATABASE_URL` set instead, the bus is a `PostgresBus` on that database (a pool of its own,
 * LISTEN/NOTIFY), on the same prefix and node id.
 */
import { createServer, type Server } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type AuthInfo } from '@modelcontextprotocol/server';
import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import { SubscriptionHub, type ListenHandlerOptions } from 'mcp-subscriptions';
import { PostgresBus } from 'mcp-subscriptions/postgres';
import { RedisBus } from 'mcp-subscriptions/redis';
// A type only: the Fastify host loads Fastify itself, when it is the one started.
import type { AuthedRequest as AuthedFastifyRequest } from '../lib/fastify.ts';
import { authenticate, principalOf, toAuthInfo } from '../../sample-app/shared/auth.ts';
import { isServiceError } from '../../sample-app/shared/errors.ts';
import { createNotesMcpServer, type ReadCheck } from '../../sample-app/shared/mcp-server.ts';
import { acceptsSubscription, canRead, NotesService, type NoteEvents } from '../../sample-app/shared/notes-service.ts';
import { offer } from '../../sample-app/shared/offer.ts';
import { TasksService } from '../../sample-app/shared/tasks-service.ts';
import { serveControl, startServer, type ControlTarget } from '../lib/control.ts';
import { PRINCIPAL } from '../lib/wire.ts';

const mode = process.argv[2];
if (mode !== 'ours' && mode !== 'sdk' && mode !== 'fastify' && mode !== 'metrics') {
  console.error('usage: host.ts ours|sdk|fastify|metrics');
  process.exit(2);
}

/** Far above every scenario's stream count, identical in both builds: capacity is not under test. */
const MAX_SUBSCRIPTIONS = 100_000;
const KEEPALIVE_MS = 15_000;
const SERVER_INFO = { name: 'mcp-subscriptions-bench-host', version: '0.1.0' };

/** How long a node waits for its bus to connect before it gives up (the orchestrator checked Redis answers). */
const BUS_CONNECT_MS = 10_000;

const readCheck: ReadCheck = (uri, { principal }) => canRead(principal, uri);
const redisUrl = process.env['BENCH_REDIS_URL'];
const databaseUrl = process.env['BENCH_DATABASE_URL'];
if ((redisUrl !== undefined || databaseUrl !== undefined) && mode !== 'ours') {
  console.error(
    'host.ts: BENCH_REDIS_URL and BENCH_DATABASE_URL apply to the ours build only (the SDK has no distributed bus)',
  );
  process.exit(2);
}
const busOptions = {
  channelPrefix: process.env['BENCH_REDIS_PREFIX'] ?? `mcp-subscriptions-bench-${process.pid}`,
  nodeId: process.env['BENCH_NODE_ID'] ?? String(process.pid),
  // stdout carries the port line the orchestrator parses: every log goes to stderr.
  logger: {
    warn: (message: string, details?: unknown) =>
      console.error(`[bus ${process.env['BENCH_NODE_ID']}] ${message}`, details ?? ''),
    error: (message: string, details?: unknown) =>
      console.error(`[bus ${process.env['BENCH_NODE_ID']}] ${message}`, details ?? ''),
  },
};
const bus =
  databaseUrl !== undefined
    ? new PostgresBus({ url: databaseUrl, ...busOptions })
    : redisUrl !== undefined
      ? new RedisBus({ url: redisUrl, client: 'ioredis', ...busOptions })
      : undefined;
// The provider must be the global one before the hub is constructed: the hub takes its meter then.
const scrape = mode === 'metrics' ? (await import('../lib/metrics.ts')).registerMeterProvider() : undefined;
// Every bench client is one principal: the per-principal share is turned off, as capacity is not under test.
const hub =
  mode !== 'sdk'
    ? new SubscriptionHub({
        maxSubscriptions: MAX_SUBSCRIPTIONS,
        maxSubscriptionsPerPrincipal: false,
        ...(bus !== undefined ? { bus } : {}),
      })
    : undefined;

// Late-bound: the notes service and the MCP server need the events before the handler exists.
let events: NoteEvents & { toolsListChanged(): void; promptsListChanged(): void };
const notes = new NotesService({
  resourceUpdated: (uri) => events.resourceUpdated(uri),
  resourcesListChanged: () => events.resourcesListChanged(),
});

const mcpHandler = createMcpHandler(
  () =>
    createNotesMcpServer({
      notes,
      canRead: readCheck,
      hub: { toolsListChanged: () => events.toolsListChanged(), promptsListChanged: () => events.promptsListChanged() },
      conformance: false,
      serverInfo: SERVER_INFO,
    } as Parameters<typeof createNotesMcpServer>[0]),
  {
    ...(hub !== undefined ? { bus: hub } : {}),
    legacy: 'reject',
    keepAliveMs: KEEPALIVE_MS,
    maxSubscriptions: MAX_SUBSCRIPTIONS,
    onerror: () => {},
  },
);
const nodeHandler = toNodeHandler(mcpHandler);

if (hub !== undefined) {
  events = hub;
} else {
  const notify = mcpHandler.notify;
  events = {
    resourceUpdated: (uri) => notify.resourceUpdated(uri),
    resourcesListChanged: () => notify.resourcesChanged(),
    toolsListChanged: () => notify.toolsChanged(),
    promptsListChanged: () => notify.promptsChanged(),
  } as typeof events;
}

const sdkBus = mcpHandler.bus as unknown as { listenerCount?: number };
const control: ControlTarget = {
  publish(kind, uri) {
    if (kind === 'tools') events.toolsListChanged();
    else events.resourceUpdated(uri as string);
  },
  openStreams: () => (hub !== undefined ? hub.stats().openStreams : (sdkBus.listenerCount ?? -1)),
  prefill(uris) {
    for (const uri of uris) notes.put(PRINCIPAL, PRINCIPAL, uri.slice(uri.lastIndexOf('/') + 1), { text: 'seed' });
  },
  ...(bus !== undefined ? { bus: () => bus.stats() } : {}),
  ...(scrape !== undefined ? { scrape } : {}),
};

/** The listen options of every build that serves listen (the Express middleware's, the Fastify plugin's). */
function listenOptions(of: SubscriptionHub): ListenHandlerOptions {
  const tasks = new TasksService(of);
  return {
    hub: of,
    capabilities: offer,
    canRead: readCheck,
    handleSubscribeResource: acceptsSubscription,
    canAccessTask: (taskId, { principal }) => tasks.isOwner(taskId, principal),
    keepAliveMs: KEEPALIVE_MS,
    serverInfo: SERVER_INFO,
  };
}

/** `ours`, `metrics` and `sdk`: the Express app, with the middleware in front of the SDK's handler but in `sdk`. */
async function expressServer(): Promise<Server> {
  const { default: express } = await import('express');
  const { mcpSubscriptions } = await import('mcp-subscriptions/express');
  type AuthedRequest = Request & { auth?: AuthInfo };
  const bearerAuth: RequestHandler = (req, res, next) => {
    const caller = authenticate(req.headers.authorization, { conformance: false });
    if (caller === undefined) {
      res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unauthorized' });
      return;
    }
    (req as AuthedRequest).auth = toAuthInfo(caller);
    next();
  };
  const app = express();
  app.disable('x-powered-by');
  const chain: RequestHandler[] = [bearerAuth];
  if (hub !== undefined) chain.push(mcpSubscriptions(listenOptions(hub)));
  app.all('/mcp', ...chain, (req, res, next) => {
    nodeHandler(req, res, req.body).catch(next);
  });

  app.use(bearerAuth);
  const api = express.Router();
  api.use(express.json());
  api.put('/notes/:owner/:name', (req, res) => {
    const principal = principalOf((req as AuthedRequest).auth) ?? '';
    const { created, note } = notes.put(principal, req.params['owner'], req.params['name'], req.body);
    res.status(created ? 201 : 200).json(note);
  });
  app.use('/api', api);
  app.use(((error, _req, res, _next) => {
    res.status(isServiceError(error) ? error.status : 500).json({ error: String(error) });
  }) as ErrorRequestHandler);
  return createServer((req, res) => {
    if (!serveControl(control, req, res)) app(req, res);
  });
}

/**
 * `fastify`: the same app on Fastify, the plugin registered before the app's own MCP route, which
 * it serves listen in front of; the route hands everything else to the SDK's handler.
 */
async function fastifyServer(of: SubscriptionHub): Promise<Server> {
  const { fastifyServer: serve, principalOfRequest } = await import('../lib/fastify.ts');
  const { mcpSubscriptions } = await import('mcp-subscriptions/fastify');
  return serve(control, async (app) => {
    await app.register(mcpSubscriptions, listenOptions(of));
    app.post('/mcp', (request, reply) => {
      reply.hijack();
      // The SDK's handler takes the caller from `req.auth`, as the Express host's middleware leaves it.
      const raw = request.raw as typeof request.raw & { auth?: AuthInfo };
      const { auth } = request as AuthedFastifyRequest;
      if (auth !== undefined) raw.auth = auth;
      return nodeHandler(raw, reply.raw, request.body);
    });
    app.put<{ Params: { owner: string; name: string } }>('/api/notes/:owner/:name', (request, reply) => {
      const { owner, name } = request.params;
      const { created, note } = notes.put(principalOfRequest(request), owner, name, request.body);
      return reply.code(created ? 201 : 200).send(note);
    });
    app.setErrorHandler((error, _request, reply) =>
      reply.code(isServiceError(error) ? error.status : 500).send({ error: String(error) }),
    );
  });
}

const server = mode === 'fastify' ? await fastifyServer(hub!) : await expressServer();
const name = mode === 'fastify' ? 'ours-fastify' : mode === 'metrics' ? 'ours-metrics' : mode;
if (bus === undefined) {
  startServer(server, name);
} else {
  const deadline = Date.now() + BUS_CONNECT_MS;
  const waitForBus = (): void => {
    if (bus.stats().connected) {
      startServer(server, `${name}-${process.env['BENCH_NODE_ID'] ?? ''}`);
    } else if (Date.now() > deadline) {
      console.error(`host.ts: the bus did not connect to ${databaseUrl ?? redisUrl} within ${BUS_CONNECT_MS} ms`);
      process.exit(1);
    } else {
      setTimeout(waitForBus, 20);
    }
  };
  waitForBus();
}
