/**
 * Starts the Express sample (`npm start`): reads the environment, listens on HOST:PORT, prints
 * `listening on http://HOST:PORT/mcp` once it accepts connections, and shuts down gracefully on
 * SIGTERM or SIGINT.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fail, IDLE_SWEEP_MS, mcpUrlOf, readConfigOrExit, SHUTDOWN_DEADLINE_MS } from '../shared/process.ts';
import { createApp } from './app.ts';

const config = readConfigOrExit();
const { app, close } = createApp(config);
const server = createServer(app);

server.once('error', (error: NodeJS.ErrnoException) => {
  fail(`Cannot listen on ${config.host}:${config.port}: ${error.code ?? error.message}`);
});
server.listen(config.port, config.host, () => {
  console.log(`listening on ${mcpUrlOf(server.address() as AddressInfo)}`);
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
