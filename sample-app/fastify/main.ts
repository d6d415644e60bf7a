/**
 * Starts the Fastify sample (`npm run start:fastify`): reads the environment, listens on HOST:PORT,
 * prints `listening on http://HOST:PORT/mcp (fastify)` once it accepts connections, and shuts down
 * gracefully on SIGTERM or SIGINT: `app.close()` ends every open listen stream with its terminal result
 * (the plugin's `preClose` hook) before the HTTP server closes, then the process exits 0.
 */
import type { AddressInfo } from 'node:net';
import { serveMetricsOrExit } from '../shared/metrics.ts';
import { exitGracefullyOnSignals, fail, mcpUrlOf, readConfigOrExit } from '../shared/process.ts';
import { createApp } from './app.ts';

const config = readConfigOrExit();
// With METRICS_PORT: the metrics server listens, and the MeterProvider is registered, before the app
// builds its hub, whose instruments report through the provider registered at its construction.
const metrics = await serveMetricsOrExit(config);
const { app, hub, ready, close } = createApp(config);
// With REDIS_URL, REDIS_CLUSTER or DATABASE_URL, announce "listening" only once this instance receives what the others publish.
await ready();

try {
  await app.listen({ port: config.port, host: config.host });
} catch (error) {
  const { code, syscall } = error as NodeJS.ErrnoException;
  // A failure to bind (or to resolve HOST) is the address's; anything else (a plugin that refused to
  // load) is the app's own, and stops it with its own message.
  if (syscall !== 'listen' && syscall !== 'getaddrinfo') throw error;
  fail(`Cannot listen on ${config.host}:${config.port}: ${code ?? String(error)}`);
}
// The host in parentheses: the contract's way for a test or a script to know which sample it started.
console.log(`listening on ${mcpUrlOf(app.server.address() as AddressInfo)} (fastify)`);

// After the drain over DRAIN_MS: close() ends every listen stream left with its terminal result, then
// closes the HTTP server; the metrics server closes last, so that a scrape while the streams end still
// answers.
exitGracefullyOnSignals(
  app.server,
  async () => {
    try {
      await close();
    } finally {
      await metrics?.close();
    }
  },
  { hub, drainMs: config.drainMs },
);
