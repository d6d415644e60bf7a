/**
 * The control routes every benchmark server serves beside its app, so the load generator can drive
 * and observe it from another process: `POST /control/publish` publishes events back to back and
 * returns each one's publish timestamp, `GET /control/usage` returns the process's own CPU time,
 * memory (after a full GC with `?gc=1`), open-stream count and (on a node joined over Redis) its bus's
 * counters, `POST /control/prefill` seeds data, and `GET /control/metrics` (ours with metrics only) is
 * its Prometheus scrape endpoint.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import path from 'node:path';
import v8 from 'node:v8';
import { now } from '../../tools/shared/clock.ts';

/** What a server under test exposes to its control routes. */
export interface ControlTarget {
  /** Publishes one event the way the host app does (hub, SDK notifier, or the ceiling's loop). */
  publish(kind: 'tools' | 'resource', uri: string | undefined): void;
  /** Listen streams the server currently counts as open. */
  openStreams(): number;
  /** Makes the host's write route see these URIs as existing (so a write is an update). */
  prefill(uris: readonly string[]): void;
  /** A node joined to others over Redis: its `RedisBus`'s `stats()`. */
  bus?(): BusStats;
  /** Ours with metrics: answers a Prometheus scrape of its `MeterProvider` (`bench/lib/metrics.ts`). */
  scrape?(req: IncomingMessage, res: ServerResponse): void;
}

/** A `RedisBus`'s counters as `GET /control/usage` reports them (`RedisBusStats`). */
export interface BusStats {
  readonly connected: boolean;
  readonly published: number;
  readonly received: number;
  readonly dropped: number;
  readonly reconnects: number;
  /** Since issue 19's routing: channels subscribed now, re-subscriptions, and the routing mode. */
  readonly subscriptions?: number;
  readonly resubscribes?: number;
  readonly routing?: string;
}

/**
 * A publish order: `count` events of `kind`, the `i`th about `uris[i % uris.length]`. `mixed`: the `i`th
 * is a tools list change where `uris[i]` is `''`, else an update of that resource.
 */
export interface PublishOrder {
  readonly kind: 'tools' | 'resource' | 'mixed';
  readonly count: number;
  readonly uris?: readonly string[];
}

/** What `GET /control/usage` answers. */
export interface Usage {
  /** `process.cpuUsage()` in µs, taken before any GC this request asked for. */
  readonly cpu: { readonly user: number; readonly system: number };
  readonly at: number;
  readonly mem: NodeJS.MemoryUsage;
  readonly streams: number;
  /** Only on a node with a Redis bus. */
  readonly bus?: BusStats;
}

const gc = (globalThis as { gc?: () => void }).gc;
/** Set by `npm run bench -- --profile`: every GC'd usage snapshot also writes a heap snapshot here. */
const profileDir = process.env['BENCH_PROFILE_DIR'];
let snapshots = 0;
/** The name {@link startServer} was given: the heap snapshots' prefix (two servers may share argv). */
let serverName = 'server';

function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString()) as unknown);
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
    req.on('error', reject);
  });
}

function json(res: ServerResponse, value: unknown, status = 200): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Serves `/control/*` for `target`; returns `false` for any other request (the app's). */
export function serveControl(target: ControlTarget, req: IncomingMessage, res: ServerResponse): boolean {
  const url = req.url ?? '';
  if (!url.startsWith('/control/')) return false;
  if (url.startsWith('/control/usage')) {
    const cpu = process.cpuUsage();
    const at = now();
    if (url.includes('gc=1')) {
      if (gc === undefined) {
        json(res, { error: 'start the server with --expose-gc' }, 500);
        return true;
      }
      gc();
      gc();
      if (profileDir !== undefined) {
        v8.writeHeapSnapshot(path.join(profileDir, `${serverName}-${++snapshots}.heapsnapshot`));
      }
    }
    const bus = target.bus?.();
    json(res, {
      cpu,
      at,
      mem: process.memoryUsage(),
      streams: target.openStreams(),
      ...(bus !== undefined ? { bus } : {}),
    } satisfies Usage);
    return true;
  }
  if (url === '/control/metrics') {
    if (target.scrape !== undefined) target.scrape(req, res);
    else json(res, { error: 'no MeterProvider in this server' }, 404);
    return true;
  }
  if (url === '/control/publish' || url === '/control/prefill') {
    readJson(req).then(
      (body) => {
        if (url === '/control/prefill') {
          target.prefill((body as { uris: string[] }).uris);
          json(res, { ok: true });
          return;
        }
        const order = body as PublishOrder;
        const uris = order.uris ?? [];
        const t = new Array<number>(order.count);
        // Back to back: nothing else runs in this process between two publishes.
        for (let i = 0; i < order.count; i++) {
          t[i] = now();
          if (order.kind === 'mixed') {
            const uri = uris[i % uris.length];
            target.publish(uri === '' || uri === undefined ? 'tools' : 'resource', uri);
          } else {
            target.publish(order.kind, order.kind === 'resource' ? uris[i % uris.length] : undefined);
          }
        }
        json(res, { t });
      },
      (error: unknown) => json(res, { error: String(error) }, 400),
    );
    return true;
  }
  json(res, { error: 'no such control route' }, 404);
  return true;
}

/**
 * Listens on 127.0.0.1, port 0, prints `{"port":N}` on stdout, and exits when the parent goes away
 * (stdin closes) or after a hard lifetime, so a benchmark server never outlives its run.
 */
export function startServer(server: Server, name: string): void {
  serverName = name;
  server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => {
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    process.stdout.write(`${JSON.stringify({ port, name, pid: process.pid })}\n`);
  });
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  setTimeout(() => process.exit(3), 60 * 60 * 1000).unref();
}
