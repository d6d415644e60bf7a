/**
 * `METRICS_PORT`: the library's OpenTelemetry instruments, served to a Prometheus scraper the way an app
 * exposes its metrics. Framework-free: every sample's `main.ts` calls {@link serveMetricsOrExit} once,
 * before it builds its app, since the hub (and its Redis or PostgreSQL bus) report through the global `MeterProvider`
 * that is registered when they are constructed, not through one registered later.
 *
 * The OpenTelemetry SDK is loaded only when `METRICS_PORT` is set: without it nothing is imported,
 * registered or listened on.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { SampleConfig } from './config.ts';
import { fail } from './process.ts';

/** The path the scraper asks for: Prometheus's default `metrics_path`. */
export const METRICS_PATH = '/metrics';

/** The metrics server, once it listens. */
export interface SampleMetrics {
  /**
   * Stops the metrics server (a scrape in flight is answered first, its connection then closed rather
   * than kept alive) and shuts the `MeterProvider` down. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * With `METRICS_PORT` set: registers a global `MeterProvider` whose reader is a `PrometheusExporter`,
 * and serves that exporter's `GET /metrics` on `HOST:METRICS_PORT`, without auth. Resolves once that
 * server listens; a port it cannot bind (in use, not permitted) stops the app with exit code 1 and a
 * message naming `METRICS_PORT`, before the app listens on `PORT`. Without `METRICS_PORT`: `undefined`,
 * and nothing is loaded.
 *
 * Call it before the app builds its hub.
 */
export async function serveMetricsOrExit(
  config: Pick<SampleConfig, 'host' | 'metricsPort'>,
): Promise<SampleMetrics | undefined> {
  const { host, metricsPort } = config;
  if (metricsPort === undefined) return undefined;
  const [{ diag, DiagConsoleLogger, DiagLogLevel, metrics }, { MeterProvider }, { PrometheusExporter }] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/exporter-prometheus'),
    ]);
  // The SDK reports a failed collection or a conflicting instrument through `diag` only: on stderr,
  // warnings and errors alone (stdout carries the one `listening on` line).
  diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.WARN);
  // Our own server rather than the exporter's: the exporter reads port 0 as its default 9464, reports a
  // port it cannot bind through `diag` alone while the app would go on starting, and its close waits for
  // a connection that is mid-scrape or has sent nothing yet, for up to Node's timeouts: past the
  // contract's 5 s.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });

  let closing = false;
  const sockets = new Set<Socket>();
  const inFlight = new Set<ServerResponse>();
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    inFlight.add(response);
    response.once('close', () => inFlight.delete(response));
    // Once closing, a connection is not kept alive for a next scrape that will not come.
    if (closing) response.setHeader('connection', 'close');
    const path = (request.url ?? '').split('?', 1)[0];
    if (path !== METRICS_PATH) {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end();
      return;
    }
    exporter.getMetricsRequestHandler(request, response);
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve) => {
    const refused = (error: NodeJS.ErrnoException): never =>
      fail(`Cannot serve metrics on ${host}:${metricsPort} (METRICS_PORT): ${error.code ?? error.message}`);
    server.once('error', refused);
    server.listen(metricsPort, host, () => {
      server.off('error', refused);
      resolve();
    });
  });
  metrics.setGlobalMeterProvider(provider);

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      closing = true;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      // A scrape being answered is answered, and its connection then closed rather than kept alive
      // (which would hold the close for the keep-alive timeout). Every other connection ends now: an idle
      // keep-alive one, and one that never sent a byte, which Node's closeIdleConnections() leaves open.
      const busy = new Set<Socket>();
      for (const response of inFlight) {
        const socket = response.socket;
        if (socket === null) continue;
        busy.add(socket);
        if (!response.headersSent) response.setHeader('connection', 'close');
        else response.once('finish', () => socket.end());
      }
      for (const socket of sockets) if (!busy.has(socket)) socket.destroy();
      await stopped;
      // After the last scrape: the provider's shutdown stops its reader, the exporter, from collecting.
      await provider.shutdown();
    })());
  return { close };
}
