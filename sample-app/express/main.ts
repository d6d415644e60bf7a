/**
 * Starts the Express sample (`npm start`): reads the environment, listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp` once it accepts connections, and shuts down gracefully on
 * SIGTERM or SIGINT.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serveMetricsOrExit } from '../shared/metrics.ts';
import { exitGracefullyOnSignals, fail, mcpUrlOf, readConfigOrExit } from '../shared/process.ts';
import { createApp } from './app.ts';

const config = readConfigOrExit();
// With METRICS_PORT: the metrics server listens, and the MeterProvider is registered, before the app
// builds its hub, whose instruments report through the provider registered at its construction.
const metrics = await serveMetricsOrExit(config);
const { app, hub, ready, close } = createApp(config);
const server = createServer(app);
// With REDIS_URL, REDIS_CLUSTER or DATABASE_URL, announce "listening" only once this instance receives what the others publish.
await ready();

server.once('error', (error: NodeJS.ErrnoException) => {
  fail(`Cannot listen on ${config.host}:${config.port}: ${error.code ?? error.message}`);
});
server.listen(config.port, config.host, () => {
  // The host in parentheses: the contract's way for a test or a script to know which sample it started.
  console.log(`listening on ${mcpUrlOf(server.address() as AddressInfo)} (express)`);
});

// After the drain over DRAIN_MS (every open listen stream gets its terminal result, resultType
// "complete", spread over it): the server closes, and the streams left, if any, end.
exitGracefullyOnSignals(
  server,
  async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    try {
      await close();
      await closed;
    } finally {
      // Last: a scrape while the streams end still answers, with their final counts.
      await metrics?.close();
    }
  },
  { hub, drainMs: config.drainMs },
);
