/**
 * Nodes of the fleet scenario, several in one process: `node ... bench/servers/fleet.ts <id>[,<id>...]`
 * starts one node per id, each a `SubscriptionHub` with a `RedisBus` of its own (its own two Redis
 * connections, node id `<id>`) and a real HTTP server on a port of its own: Express with
 * `mcpSubscriptions()` on `/mcp` (listen only: no MCP server behind it, as only listen is under test)
 * and the `/control/*` routes of `bench/lib/control.ts`. Every request acts as the bench's one
 * principal; every URI is readable.
 *
 * The environment says where and how: `BENCH_REDIS_URL`, `BENCH_REDIS_PREFIX` (the channel prefix, one
 * per fleet), and `BENCH_ROUTING` (`interest`, `broadcast` or `buckets:N`, the bus's `routing` option).
 * With `BENCH_DATABASE_URL` instead of `BENCH_REDIS_URL`, each node's bus is a `PostgresBus` (a pool
 * of its own and one listening connection) on that database, with `BENCH_ROUTING` `pg:interest` or
 * `pg:broadcast`.
 * Once every node's bus is connected it prints one line, `{"ports":[...]}`, in the order of the ids.
 */
import { createServer, type Server } from 'node:http';
import express from 'express';
import { defineCapabilities, SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { PostgresBus, type PostgresBusRouting } from 'mcp-subscriptions/postgres';
import { RedisBus, type RedisBusOptions } from 'mcp-subscriptions/redis';
import { serveControl, type ControlTarget } from '../lib/control.ts';
import { PRINCIPAL } from '../lib/wire.ts';

const ids = (process.argv[2] ?? '').split(',').filter((id) => id !== '');
const redisUrl = process.env['BENCH_REDIS_URL'];
const databaseUrl = process.env['BENCH_DATABASE_URL'];
if (ids.length === 0 || (redisUrl === undefined) === (databaseUrl === undefined)) {
  console.error('usage: BENCH_REDIS_URL=redis://... or BENCH_DATABASE_URL=postgres://... fleet.ts <id>[,<id>...]');
  process.exit(2);
}
const prefix = process.env['BENCH_REDIS_PREFIX'] ?? `mcp-subscriptions-bench-fleet-${process.pid}`;
const routingName = process.env['BENCH_ROUTING'] ?? '';

/** The bus's `routing` option from its bench name. */
function routingOption(name: string): unknown {
  const buckets = /^buckets:(\d+)$/.exec(name);
  return buckets !== null ? { buckets: Number(buckets[1]) } : name;
}

/** What the scenario's streams follow: resource updates and the tools list. */
const offer = defineCapabilities({ toolsListChanged: true, resourceSubscriptions: true });
/** Far above the scenario's stream count: capacity is not under test. */
const MAX_SUBSCRIPTIONS = 100_000;
const BUS_CONNECT_MS = 10_000;

interface FleetNode {
  readonly bus: RedisBus | PostgresBus;
  readonly server: Server;
}

function startNode(id: string): FleetNode {
  const logger = {
    warn: (message: string, details?: unknown) => console.error(`[bus ${id}] ${message}`, details ?? ''),
    error: (message: string, details?: unknown) => console.error(`[bus ${id}] ${message}`, details ?? ''),
  };
  const bus =
    databaseUrl !== undefined
      ? new PostgresBus({
          url: databaseUrl,
          channelPrefix: prefix,
          nodeId: id,
          routing: (routingName.replace(/^pg:/, '') || 'interest') as PostgresBusRouting,
          logger,
        })
      : redisBus(id, logger);
  return serveNode(bus);
}

/** A `RedisBus` of its own for node `id`, routed as `BENCH_ROUTING` says. */
function redisBus(id: string, logger: { warn(message: string, details?: unknown): void }): RedisBus {
  const options = {
    url: redisUrl as string,
    client: 'ioredis',
    channelPrefix: prefix,
    nodeId: id,
    ...(routingName === '' ? {} : { routing: routingOption(routingName) }),
    // stdout carries the ports line the orchestrator parses: every log goes to stderr.
    logger,
  } as RedisBusOptions;
  return new RedisBus(options);
}

/** The node's hub on `bus`, its listen route and its control routes, on a server not listening yet. */
function serveNode(bus: RedisBus | PostgresBus): FleetNode {
  const hub = new SubscriptionHub({ maxSubscriptions: MAX_SUBSCRIPTIONS, maxSubscriptionsPerPrincipal: false, bus });
  const app = express();
  app.disable('x-powered-by');
  app.post(
    '/mcp',
    mcpSubscriptions({
      hub,
      capabilities: offer,
      principal: () => PRINCIPAL,
      canRead: () => true,
      keepAliveMs: 15_000,
      serverInfo: { name: 'mcp-subscriptions-bench-fleet', version: '0.1.0' },
    }),
    (_req, res) => {
      res.status(404).json({ error: 'listen only' });
    },
  );
  const control: ControlTarget = {
    publish(kind, uri) {
      if (kind === 'tools') hub.toolsListChanged();
      else hub.resourceUpdated(uri as string);
    },
    openStreams: () => hub.stats().openStreams,
    prefill: () => {},
    bus: () => bus.stats(),
  };
  const server = createServer((req, res) => {
    if (!serveControl(control, req, res)) app(req, res);
  });
  return { bus, server };
}

const nodes = ids.map(startNode);
const deadline = Date.now() + BUS_CONNECT_MS;
const waitForBuses = (): void => {
  if (nodes.every((node) => node.bus.stats().connected)) {
    void Promise.all(
      nodes.map(
        (node) =>
          new Promise<number>((resolve) => {
            node.server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => {
              const address = node.server.address();
              resolve(typeof address === 'object' && address !== null ? address.port : 0);
            });
          }),
      ),
    ).then((ports) => process.stdout.write(`${JSON.stringify({ ports, ids, pid: process.pid })}\n`));
  } else if (Date.now() > deadline) {
    console.error(`fleet.ts: the buses did not connect to ${databaseUrl ?? redisUrl} within ${BUS_CONNECT_MS} ms`);
    process.exit(1);
  } else {
    setTimeout(waitForBuses, 20);
  }
};
waitForBuses();
// Ends when the orchestrator goes away (stdin closes), or after a hard lifetime.
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
setTimeout(() => process.exit(3), 60 * 60 * 1000).unref();
