/**
 * Starts the Nest sample (`npm run start:nest`): reads the environment, listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp` once it accepts connections, and shuts down gracefully on
 * SIGTERM or SIGINT: `app.close()` ends every open listen stream with its terminal result (the
 * module's shutdown hook) before the HTTP server closes, then the process exits 0.
 */
import 'reflect-metadata';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConsoleLogger, type LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { exitGracefullyOnSignals, fail, mcpUrlOf, readConfigOrExit } from '../shared/process.ts';
import { AppModule } from './app.module.ts';
import { SampleBusProvider } from './config.ts';

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
const app = await NestFactory.create<NestExpressApplication>(AppModule.register(config), {
  // The MCP path is parsed after the guards (by the listen route); the REST routes have their own parser.
  bodyParser: false,
  logger: new StderrLogger({ logLevels: ['error', 'warn'] }),
  abortOnError: false,
});
app.disable('x-powered-by');
// With REDIS_URL or REDIS_CLUSTER, announce "listening" only once this instance receives what the others publish.
await app.get(SampleBusProvider).sample.ready();
try {
  await app.listen(config.port, config.host);
} catch (error) {
  fail(`Cannot listen on ${config.host}:${config.port}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
}
const server: Server = app.getHttpServer();
// The host in parentheses: the contract's way for a test or a script to know which sample it started.
console.log(`listening on ${mcpUrlOf(server.address() as AddressInfo)} (nest on express)`);

// app.close() ends every open listen stream with its terminal result (the module's shutdown hook),
// then closes the HTTP server.
exitGracefullyOnSignals(server, () => app.close());
