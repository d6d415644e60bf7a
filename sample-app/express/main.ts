/**
 * Starts the Express sample (`npm start`): reads the environment, listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp` once it accepts connections, and shuts down gracefully on
 * SIGTERM or SIGINT.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig, type SampleConfig } from '../shared/config.ts';
import { createApp } from './app.ts';

/** The contract allows 5 s from the signal to exit; this leaves a margin for the process to end. */
const SHUTDOWN_DEADLINE_MS = 4000;
/** How often idle keep-alive sockets are swept while the server drains. */
const IDLE_SWEEP_MS = 50;

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

function readConfig(): SampleConfig {
  try {
    return loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) fail(`Invalid configuration: ${error.message}`);
    throw error;
  }
}

function urlOf(address: AddressInfo): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}/mcp`;
}

const config = readConfig();
const { app, close } = createApp(config);
const server = createServer(app);

server.once('error', (error: NodeJS.ErrnoException) => {
  fail(`Cannot listen on ${config.host}:${config.port}: ${error.code ?? error.message}`);
});
server.listen(config.port, config.host, () => {
  console.log(`listening on ${urlOf(server.address() as AddressInfo)}`);
});

let shuttingDown = false;

async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  console.error(`[sample-app] ${signal}: ending listen streams and closing`);
  // Whatever a client does (holds a socket, stops reading), the process is gone before the deadline.
  setTimeout(() => {
    server.closeAllConnections();
    process.exit(0);
  }, SHUTDOWN_DEADLINE_MS).unref();

  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  let exitCode = 0;
  try {
    // Every open listen stream gets its terminal result (resultType "complete"), then ends.
    await close();
  } catch (error) {
    console.error('[sample-app] shutdown failed:', error);
    exitCode = 1;
  }
  // Streams that just ended leave keep-alive sockets behind; in-flight requests may still finish.
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  await closed;
  clearInterval(sweep);
  process.exit(exitCode);
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    void shutdown(signal);
  });
}
