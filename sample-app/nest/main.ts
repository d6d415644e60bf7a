/**
 * Starts the Nest sample (`npm run start:nest`): reads the environment, creates the app on the
 * platform `NEST_PLATFORM` names (Express by default, or Fastify), listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp (nest on <platform>)` once it accepts connections, and shuts down
 * gracefully on SIGTERM or SIGINT: `app.close()` ends every open listen stream with its terminal result
 * (the module's shutdown hook) before the HTTP server closes, then the process exits 0.
 */
import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConsoleLogger, type LogLevel } from '@nestjs/common';
import { SubscriptionHub } from 'mcp-subscriptions/nest';
import { serveMetricsOrExit } from '../shared/metrics.ts';
import { exitGracefullyOnSignals, fail, mcpUrlOf, readConfigOrExit } from '../shared/process.ts';
import { AppModule } from './app.module.ts';
import { nestPlatformOf, SampleBusProvider } from './config.ts';
import { createNestApp } from './platform.ts';

/** Nest's console logger, on stderr only: stdout carries the one `listening on` line. */
class StderrLogger extends ConsoleLogger {
  protected override printMessages(
    messages: unknown[],
    context?: string,
    logLevel?: LogLevel,
    _writeStreamType?: 'stdout' | 'stderr',
  ): void {
    super.printMessages(messages, context, logLevel, 'stderr');
  }
}

const config = readConfigOrExit();
// NEST_PLATFORM: Nest's Express platform (the default) or its Fastify one.
const platform = readConfigOrExit(nestPlatformOf);
// With METRICS_PORT: the metrics server listens, and the MeterProvider is registered, before Nest builds
// the module's providers, the hub among them, whose instruments report through the provider registered
// at its construction.
const metrics = await serveMetricsOrExit(config);
const app = await createNestApp(platform, AppModule.register(config), {
  logger: new StderrLogger({ logLevels: ['error', 'warn'] }),
  abortOnError: false,
});
// With REDIS_URL, REDIS_CLUSTER or DATABASE_URL, announce "listening" only once this instance receives what the others publish.
await app.get(SampleBusProvider).sample.ready();
try {
  await app.listen(config.port, config.host);
} catch (error) {
  fail(`Cannot listen on ${config.host}:${config.port}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
}
const server = app.getHttpServer() as Server;
// The host in parentheses: the contract's way for a test or a script to know which sample it started.
console.log(`listening on ${mcpUrlOf(server.address() as AddressInfo)} (nest on ${platform})`);

// After the drain over DRAIN_MS: app.close() ends every listen stream left with its terminal result
// (the module's shutdown hook), then closes the HTTP server; the metrics server closes last, so that a
// scrape while the streams end still answers.
exitGracefullyOnSignals(
  server,
  async () => {
    try {
      await app.close();
    } finally {
      await metrics?.close();
    }
  },
  { hub: app.get(SubscriptionHub), drainMs: config.drainMs },
);
