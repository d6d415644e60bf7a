/**
 * The benchmark's host app, in two builds that differ only in who serves `subscriptions/listen`:
 *
 * - `ours`: Express, the host's bearer auth, `mcpSubscriptions()` in front of the SDK's
 *   `toNodeHandler(createMcpHandler(...))`, the hub as the SDK's bus (the sample app's composition);
 * - `sdk`: the same app without the middleware: the SDK serves listen itself, and the host publishes
 *   through `handler.notify`.
 *
 * Both serve the sample app's notes service (its write route `PUT /api/notes/:owner/:name` publishes
 * `resources/updated`), its MCP server, its read check and subscribe hook, plus the `/control/*`
 * routes of `bench/lib/control.ts`. Usage: `node --expose-gc ... bench/servers/host.ts ours|sdk`.
 */
import { createServer } from 'node:http';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, type AuthInfo } from '@modelcontextprotocol/server';
import express, { type RequestHandler } from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { authenticate, principalOf, toAuthInfo } from '../../sample-app/shared/auth.ts';
import { isServiceError } from '../../sample-app/shared/errors.ts';
import { createNotesMcpServer, type ReadCheck } from '../../sample-app/shared/mcp-server.ts';
import { acceptsSubscription, canRead, NotesService, type NoteEvents } from '../../sample-app/shared/notes-service.ts';
import { offer } from '../../sample-app/shared/offer.ts';
import { TasksService } from '../../sample-app/shared/tasks-service.ts';
import { serveControl, startServer, type ControlTarget } from '../lib/control.ts';
import { PRINCIPAL } from '../lib/wire.ts';

const mode = process.argv[2];
if (mode !== 'ours' && mode !== 'sdk') {
  console.error('usage: host.ts ours|sdk');
  process.exit(2);
}

/** Far above every scenario's stream count, identical in both builds: capacity is not under test. */
const MAX_SUBSCRIPTIONS = 100_000;
const KEEPALIVE_MS = 15_000;
const SERVER_INFO = { name: 'mcp-subscriptions-bench-host', version: '0.1.0' };

type AuthedRequest = express.Request & { auth?: AuthInfo };

const bearerAuth: RequestHandler = (req, res, next) => {
  const caller = authenticate(req.headers.authorization, { conformance: false });
  if (caller === undefined) {
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unauthorized' });
    return;
  }
  (req as AuthedRequest).auth = toAuthInfo(caller);
  next();
};

const readCheck: ReadCheck = (uri, { principal }) => canRead(principal, uri);
// Every bench client is one principal: the per-principal share is turned off, as capacity is not under test.
const hub =
  mode === 'ours'
    ? new SubscriptionHub({ maxSubscriptions: MAX_SUBSCRIPTIONS, maxSubscriptionsPerPrincipal: false })
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

const app = express();
app.disable('x-powered-by');
const chain: RequestHandler[] = [bearerAuth];
if (hub !== undefined) {
  const tasks = new TasksService(hub);
  chain.push(
    mcpSubscriptions({
      hub,
      capabilities: offer,
      canRead: readCheck,
      handleSubscribeResource: acceptsSubscription,
      canAccessTask: (taskId, { principal }) => tasks.isOwner(taskId, principal),
      keepAliveMs: KEEPALIVE_MS,
      serverInfo: SERVER_INFO,
    }),
  );
}
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
}) as express.ErrorRequestHandler);

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
};

const server = createServer((req, res) => {
  if (!serveControl(control, req, res)) app(req, res);
});
startServer(server, mode);
